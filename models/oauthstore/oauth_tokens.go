package oauthstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/sqldb"
	"time"

	"github.com/uptrace/bun"
)

// RefreshTokensPerUser is how many refresh tokens a user may hold (spec 5,
// rule 3): storing one more deletes the oldest, in use or not.
const RefreshTokensPerUser = 20

// OAuthTokenKind is the kind of a row in oauth_tokens.
type OAuthTokenKind string

// The kinds of stored OAuth tokens.
const (
	OAuthCode    OAuthTokenKind = "code"
	OAuthAccess  OAuthTokenKind = "access"
	OAuthRefresh OAuthTokenKind = "refresh"
	OAuthPKCE    OAuthTokenKind = "pkce"
)

// OAuthToken is a stored authorization code, access token, refresh token or
// PKCE challenge: the request it was issued for, keyed by the HMAC signature
// of the token. The token itself is never stored. The authorization
// server's adapter (api/oauth) maps it to and from its protocol library.
type OAuthToken struct {
	bun.BaseModel `bun:"table:oauth_tokens,alias:oauth_token"`

	Kind            OAuthTokenKind  `bun:"kind,pk"`
	Signature       string          `bun:"signature,pk"`
	Seq             int64           `bun:"seq"`
	RequestID       string          `bun:"request_id"`
	OrgID           int64           `bun:"org_id"`
	ClientID        string          `bun:"client_id"`
	UserID          int64           `bun:"user_id"`
	RequestedAt     time.Time       `bun:"requested_at"`
	ExpiresAt       *time.Time      `bun:"expires_at"`
	Active          bool            `bun:"active"`
	RequestedScopes string          `bun:"requested_scopes"`
	GrantedScopes   string          `bun:"granted_scopes"`
	Form            string          `bun:"form"`
	Session         json.RawMessage `bun:"session,type:json"`

	// Client is loaded with the row, in the same query; nil when the client
	// was deleted.
	Client *OAuthClient `bun:"rel:belongs-to,join:client_id=id"`
}

// OAuthTokenStore keeps the authorization server's tokens. Its methods run
// on the database; those of an OAuthTokenTx (Begin) in one transaction.
type OAuthTokenStore struct{ db bun.IDB }

// NewOAuthTokenStore returns the OAuthTokenStore over db (the database or a transaction).
func NewOAuthTokenStore(db bun.IDB) *OAuthTokenStore { return &OAuthTokenStore{db: db} }

// OAuthTokenTx is an OAuthTokenStore whose writes share one transaction:
// the authorization server's library asks for one around the steps of a
// grant. End it with Commit or Rollback.
type OAuthTokenTx struct {
	OAuthTokenStore
	tx bun.Tx
}

// Begin opens a transaction for several token writes.
func (s *OAuthTokenStore) Begin(ctx context.Context) (*OAuthTokenTx, error) {
	db, ok := s.db.(*bun.DB)
	if !ok {
		return nil, errors.New("begin OAuth transaction: already in one")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin OAuth transaction: %w", err)
	}
	return &OAuthTokenTx{OAuthTokenStore: OAuthTokenStore{db: tx}, tx: tx}, nil
}

// Commit ends the transaction, keeping its writes.
func (t *OAuthTokenTx) Commit() error { return t.tx.Commit() }

// Rollback ends the transaction, dropping its writes. sql.ErrTxDone when it
// already ended.
func (t *OAuthTokenTx) Rollback() error { return t.tx.Rollback() }

// InTx runs fn with a transaction of its own: committed when fn returns nil,
// rolled back otherwise.
func (s *OAuthTokenStore) InTx(ctx context.Context, fn func(tx *OAuthTokenTx) error) error {
	tx, err := s.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return fmt.Errorf("%w (and rolling back: %w)", err, rbErr)
		}
		return err
	}
	return tx.Commit()
}

// Create stores token, filling its Seq. A refresh token that leaves its user
// holding more than RefreshTokensPerUser deletes the oldest, in use or not;
// the access tokens made from them run out on their own.
func (s *OAuthTokenStore) Create(ctx context.Context, token *OAuthToken) error {
	token.Seq = sqldb.NewID()
	if _, err := s.db.NewInsert().Model(token).Exec(ctx); err != nil {
		return fmt.Errorf("store %s: %w", token.Kind, err)
	}
	if token.Kind == OAuthRefresh {
		return trimRefreshTokens(ctx, s.db, token.UserID)
	}
	return nil
}

// trimRefreshTokens keeps the user's RefreshTokensPerUser newest refresh
// tokens and deletes the rest.
func trimRefreshTokens(ctx context.Context, db bun.IDB, userID int64) error {
	var cutoff []int64
	err := db.NewSelect().Model((*OAuthToken)(nil)).Column("seq").
		Where("kind = ? AND user_id = ?", OAuthRefresh, userID).
		OrderExpr("seq DESC").Offset(RefreshTokensPerUser-1).Limit(1).
		Scan(ctx, &cutoff)
	if err != nil {
		return fmt.Errorf("find the user's oldest refresh tokens: %w", err)
	}
	if len(cutoff) == 0 {
		return nil
	}
	_, err = db.NewDelete().Model((*OAuthToken)(nil)).
		Where("kind = ? AND user_id = ? AND seq < ?", OAuthRefresh, userID, cutoff[0]).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("delete the user's oldest refresh tokens: %w", err)
	}
	return nil
}

// ErrOAuthTokenNotFound is the answer for an unknown token.
var ErrOAuthTokenNotFound = models.NotFound("Token", "the token does not exist")

// Get loads the token of kind stored under signature, with its client.
// ErrOAuthTokenNotFound when missing or when its client was deleted.
func (s *OAuthTokenStore) Get(ctx context.Context, kind OAuthTokenKind, signature string) (*OAuthToken, error) {
	row := new(OAuthToken)
	err := s.db.NewSelect().Model(row).Relation("Client").
		Where("oauth_token.kind = ? AND oauth_token.signature = ?", kind, signature).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrOAuthTokenNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", kind, err)
	}
	if row.Client == nil || row.Client.ID == "" {
		return nil, ErrOAuthTokenNotFound
	}
	return row, nil
}

// Deactivate marks the active token of kind under signature used, and
// reports whether it was active (false: unknown or used before, as when a
// concurrent exchange won).
func (s *OAuthTokenStore) Deactivate(ctx context.Context, kind OAuthTokenKind, signature string) (bool, error) {
	res, err := s.db.NewUpdate().Model((*OAuthToken)(nil)).
		Set("active = ?", false).
		Where("kind = ? AND signature = ? AND active = ?", kind, signature, true).
		Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("invalidate %s: %w", kind, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// Delete removes the token of kind under signature, if any.
func (s *OAuthTokenStore) Delete(ctx context.Context, kind OAuthTokenKind, signature string) error {
	_, err := s.db.NewDelete().Model((*OAuthToken)(nil)).
		Where("kind = ? AND signature = ?", kind, signature).Exec(ctx)
	if err != nil {
		return fmt.Errorf("delete %s: %w", kind, err)
	}
	return nil
}

// DeleteRequest removes every token of kind issued for the request.
func (s *OAuthTokenStore) DeleteRequest(ctx context.Context, kind OAuthTokenKind, requestID string) error {
	_, err := s.db.NewDelete().Model((*OAuthToken)(nil)).
		Where("kind = ? AND request_id = ?", kind, requestID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("delete %s: %w", kind, err)
	}
	return nil
}

// CountRefreshTokens returns how many refresh tokens the user holds.
func (s *OAuthTokenStore) CountRefreshTokens(ctx context.Context, userID int64) (int, error) {
	n, err := s.db.NewSelect().Model((*OAuthToken)(nil)).
		Where("kind = ? AND user_id = ?", OAuthRefresh, userID).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("count refresh tokens: %w", err)
	}
	return int(n), nil
}

// PurgeExpired deletes codes, access tokens and PKCE challenges that expired
// before the given time, and returns how many. Refresh tokens never expire.
func (s *OAuthTokenStore) PurgeExpired(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.NewDelete().Model((*OAuthToken)(nil)).
		Where("expires_at IS NOT NULL AND expires_at < ?", before.UTC()).
		Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("purge expired OAuth tokens: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
