package oauthstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
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

	Kind      OAuthTokenKind `bun:"kind,pk"`
	Signature string         `bun:"signature,pk"`
	Seq       int64          `bun:"seq"`
	RequestID string         `bun:"request_id"`
	OrgID     int64          `bun:"org_id"`
	ClientID  string         `bun:"client_id"`
	// UserID is the user the token acts for; 0 (NULL) for a token of a
	// service client's own (the client credentials grant), which acts for
	// its client only.
	UserID          int64           `bun:"user_id,nullzero"`
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
// on the database, each write in a transaction of its own (sqldb.InTx);
// those of an OAuthTokenTx (Begin) in one transaction.
//
// The writes record their audit events (events.go): storing an access or
// a refresh token records oauth.token.issued, deleting one
// oauth.token.revoked; codes and PKCE challenges, consumed by the exchange
// that issues the tokens, record none, nor does PurgeExpired.
type OAuthTokenStore struct{ db bun.IDB }

// NewOAuthTokenStore returns the OAuthTokenStore over db (the database or a transaction).
func NewOAuthTokenStore(db bun.IDB) *OAuthTokenStore { return &OAuthTokenStore{db: db} }

// OAuthTokenTx is an OAuthTokenStore whose writes share one transaction:
// the authorization server's library asks for one around the steps of a
// grant. Call its methods with the context Begin returned, and end it with
// Commit or Rollback.
type OAuthTokenTx struct {
	OAuthTokenStore
	tx      bun.Tx
	pending *models.PendingEvents
}

// Begin opens a transaction for several token writes. It returns the
// context to call the transaction's methods with: it collects the audit
// events they record (models.WithPendingEvents), which Commit writes in
// the transaction.
func (s *OAuthTokenStore) Begin(ctx context.Context) (context.Context, *OAuthTokenTx, error) {
	db, ok := s.db.(*bun.DB)
	if !ok {
		return ctx, nil, errors.New("begin OAuth transaction: already in one")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return ctx, nil, fmt.Errorf("begin OAuth transaction: %w", err)
	}
	txCtx, pending := models.WithPendingEvents(ctx)
	return txCtx, &OAuthTokenTx{OAuthTokenStore: OAuthTokenStore{db: tx}, tx: tx, pending: pending}, nil
}

// Commit ends the transaction, keeping its writes and writing the audit
// events they recorded with them (sqldb.CommitWithEvents). ctx gives the
// events their origin (the context Begin returned, or one derived from it).
func (t *OAuthTokenTx) Commit(ctx context.Context) error {
	return sqldb.CommitWithEvents(ctx, t.tx, t.pending.Events())
}

// Rollback ends the transaction, dropping its writes and their events.
// sql.ErrTxDone when it already ended.
func (t *OAuthTokenTx) Rollback() error { return t.tx.Rollback() }

// InTx runs fn with a transaction of its own and the context to use it
// with: committed with its events when fn returns nil, rolled back
// otherwise.
func (s *OAuthTokenStore) InTx(ctx context.Context, fn func(ctx context.Context, tx *OAuthTokenTx) error) error {
	txCtx, tx, err := s.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(txCtx, tx); err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return fmt.Errorf("%w (and rolling back: %w)", err, rbErr)
		}
		return err
	}
	return tx.Commit(txCtx)
}

// Create stores token, filling its Seq. A refresh token that leaves its user
// holding more than RefreshTokensPerUser deletes the oldest, in use or not;
// the access tokens made from them run out on their own. Records
// oauth.token.issued for an access or a refresh token, and
// oauth.token.revoked for each refresh token the cap deleted.
func (s *OAuthTokenStore) Create(ctx context.Context, token *OAuthToken) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		token.Seq = sqldb.NewID()
		if _, err := tx.NewInsert().Model(token).Exec(ctx); err != nil {
			return fmt.Errorf("store %s: %w", token.Kind, err)
		}
		if token.Kind != OAuthAccess && token.Kind != OAuthRefresh {
			return nil
		}
		counts := map[OAuthTokenKind]int{token.Kind: 1}
		if err := recordGrantEvent(ctx, tx, audit.OAuthTokenIssued, grantOf(token), counts, ""); err != nil {
			return err
		}
		if token.Kind == OAuthRefresh && token.UserID != 0 {
			return trimRefreshTokens(ctx, tx, token.UserID)
		}
		return nil
	})
}

// trimRefreshTokens keeps the user's RefreshTokensPerUser newest refresh
// tokens and deletes the rest, recording oauth.token.revoked for each.
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
	var deleted []OAuthToken
	err = db.NewDelete().Model((*OAuthToken)(nil)).
		Where("kind = ? AND user_id = ? AND seq < ?", OAuthRefresh, userID, cutoff[0]).
		Returning(deletedColumns).Scan(ctx, &deleted)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("delete the user's oldest refresh tokens: %w", err)
	}
	return recordRevoked(ctx, db, deleted, fmt.Sprintf("the user holds more than %d refresh tokens: the oldest are revoked", RefreshTokensPerUser))
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
	var n int64
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewUpdate().Model((*OAuthToken)(nil)).
			Set("active = ?", false).
			Where("kind = ? AND signature = ? AND active = ?", kind, signature, true).
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("invalidate %s: %w", kind, err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n > 0, err
}

// Delete removes the token of kind under signature, if any. Deleting an
// access or a refresh token records oauth.token.revoked.
func (s *OAuthTokenStore) Delete(ctx context.Context, kind OAuthTokenKind, signature string) error {
	return s.deleteWhere(ctx, kind, "kind = ? AND signature = ?", kind, signature)
}

// DeleteRequest removes every token of kind issued for the request,
// recording oauth.token.revoked when they are access or refresh tokens.
func (s *OAuthTokenStore) DeleteRequest(ctx context.Context, kind OAuthTokenKind, requestID string) error {
	return s.deleteWhere(ctx, kind, "kind = ? AND request_id = ?", kind, requestID)
}

// DeleteGrant revokes the grant of a request: its refresh token and every
// access token made from it, recording one oauth.token.revoked.
func (s *OAuthTokenStore) DeleteGrant(ctx context.Context, requestID string) error {
	return s.deleteWhere(ctx, OAuthRefresh, "kind IN (?) AND request_id = ?", bun.List([]OAuthTokenKind{OAuthRefresh, OAuthAccess}), requestID)
}

// deleteWhere deletes the tokens where says and records their revocation,
// for access and refresh tokens (kind names the tokens in errors).
func (s *OAuthTokenStore) deleteWhere(ctx context.Context, kind OAuthTokenKind, where string, args ...any) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		var deleted []OAuthToken
		err := tx.NewDelete().Model((*OAuthToken)(nil)).Where(where, args...).
			Returning(deletedColumns).Scan(ctx, &deleted)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delete %s: %w", kind, err)
		}
		return recordRevoked(ctx, tx, deleted, "")
	})
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
// It records no event: the tokens had ended on their own, and their
// issuing was recorded.
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
