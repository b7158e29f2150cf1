package models

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/pkce"
	"github.com/ory/fosite/storage"
	"github.com/uptrace/bun"
)

// RefreshTokensPerUser is how many refresh tokens a user may hold (spec 5,
// rule 3): storing one more deletes the oldest, in use or not.
const RefreshTokensPerUser = 20

// The kinds of rows in oauth_tokens.
const (
	tokenKindCode    = "code"
	tokenKindAccess  = "access"
	tokenKindRefresh = "refresh"
	tokenKindPKCE    = "pkce"
)

// oauthToken is a stored authorization code, access token, refresh token or
// PKCE challenge: the request it was issued for, keyed by the HMAC signature
// of the token. The token itself is never stored.
type oauthToken struct {
	bun.BaseModel `bun:"table:oauth_tokens,alias:oauth_token"`

	Kind            string          `bun:"kind,pk"`
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

	// Client is loaded with the row, in the same query.
	Client *OAuthClient `bun:"rel:belongs-to,join:client_id=id"`
}

// OAuthStore keeps the authorization server's state for fosite: clients (read
// only here), authorization codes, access and refresh tokens and PKCE
// challenges. A request's session must carry the user id as its subject
// (GetSubject, a digit string) and is stored as JSON.
type OAuthStore struct {
	db      *bun.DB
	clients *ClientStore
}

// NewOAuthStore returns the OAuth store over db.
func NewOAuthStore(db *bun.DB) *OAuthStore {
	return &OAuthStore{db: db, clients: NewClientStore(db)}
}

var (
	_ fosite.Storage                = (*OAuthStore)(nil)
	_ oauth2.CoreStorage            = (*OAuthStore)(nil)
	_ oauth2.TokenRevocationStorage = (*OAuthStore)(nil)
	_ pkce.PKCERequestStorage       = (*OAuthStore)(nil)
	_ storage.Transactional         = (*OAuthStore)(nil)
)

// txKey holds the transaction BeginTX opened in a context.
type txKey struct{}

// conn returns the transaction of ctx, or the database.
func (s *OAuthStore) conn(ctx context.Context) bun.IDB {
	if tx, ok := ctx.Value(txKey{}).(*bun.Tx); ok {
		return tx
	}
	return s.db
}

// BeginTX implements storage.Transactional: the store's methods called with
// the returned context run in the transaction.
func (s *OAuthStore) BeginTX(ctx context.Context) (context.Context, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return ctx, fmt.Errorf("begin OAuth transaction: %w", err)
	}
	return context.WithValue(ctx, txKey{}, &tx), nil
}

// Commit implements storage.Transactional.
func (s *OAuthStore) Commit(ctx context.Context) error {
	tx, ok := ctx.Value(txKey{}).(*bun.Tx)
	if !ok {
		return errors.New("commit: no OAuth transaction in the context")
	}
	return tx.Commit()
}

// Rollback implements storage.Transactional.
func (s *OAuthStore) Rollback(ctx context.Context) error {
	tx, ok := ctx.Value(txKey{}).(*bun.Tx)
	if !ok {
		return errors.New("roll back: no OAuth transaction in the context")
	}
	return tx.Rollback()
}

// InTx runs fn with a context whose store calls share one transaction.
func (s *OAuthStore) InTx(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	ctx, err = s.BeginTX(ctx)
	if err != nil {
		return err
	}
	if err := fn(ctx); err != nil {
		if rbErr := s.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return fmt.Errorf("%w (and rolling back: %v)", err, rbErr)
		}
		return err
	}
	return s.Commit(ctx)
}

// GetClient implements fosite.ClientManager. fosite.ErrNotFound when
// missing.
func (s *OAuthStore) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	if id == "" {
		return nil, fosite.ErrNotFound
	}
	client, err := NewClientStore(s.conn(ctx)).Get(ctx, id)
	if ErrorCode(err) == ENOTFOUND {
		return nil, fosite.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return client, nil
}

// ClientAssertionJWTValid implements fosite.ClientManager. JWT client
// assertions are not supported: every one is refused.
func (s *OAuthStore) ClientAssertionJWTValid(context.Context, string) error {
	return fosite.ErrJTIKnown
}

// SetClientAssertionJWT implements fosite.ClientManager; not supported.
func (s *OAuthStore) SetClientAssertionJWT(context.Context, string, time.Time) error {
	return errors.New("JWT client assertions are not supported")
}

// create stores request under (kind, signature), expiring when its session
// says for tokenType (never when zero).
func (s *OAuthStore) create(ctx context.Context, kind, signature string, tokenType fosite.TokenType, req fosite.Requester) error {
	row, err := newTokenRow(kind, signature, tokenType, req)
	if err != nil {
		return err
	}
	if _, err := s.conn(ctx).NewInsert().Model(row).Exec(ctx); err != nil {
		return fmt.Errorf("store %s: %w", kind, err)
	}
	return nil
}

func newTokenRow(kind, signature string, tokenType fosite.TokenType, req fosite.Requester) (*oauthToken, error) {
	client, ok := req.GetClient().(*OAuthClient)
	if !ok {
		return nil, fmt.Errorf("store %s: the request's client is %T, not *models.OAuthClient", kind, req.GetClient())
	}
	sess := req.GetSession()
	if sess == nil {
		return nil, fmt.Errorf("store %s: the request has no session", kind)
	}
	userID, err := strconv.ParseInt(sess.GetSubject(), 10, 64)
	if err != nil || userID <= 0 {
		return nil, fmt.Errorf("store %s: the session's subject %q is no user id", kind, sess.GetSubject())
	}
	doc, err := json.Marshal(sess)
	if err != nil {
		return nil, fmt.Errorf("store %s: encode session: %w", kind, err)
	}
	row := &oauthToken{
		Kind:            kind,
		Signature:       signature,
		Seq:             NewID(),
		RequestID:       req.GetID(),
		OrgID:           client.OrgID,
		ClientID:        client.ID,
		UserID:          userID,
		RequestedAt:     req.GetRequestedAt().UTC(),
		Active:          true,
		RequestedScopes: strings.Join(req.GetRequestedScopes(), " "),
		GrantedScopes:   strings.Join(req.GetGrantedScopes(), " "),
		Form:            req.GetRequestForm().Encode(),
		Session:         doc,
	}
	if exp := sess.GetExpiresAt(tokenType); !exp.IsZero() {
		exp = exp.UTC()
		row.ExpiresAt = &exp
	}
	return row, nil
}

// get loads the request stored under (kind, signature), decoding its session
// into session. fosite.ErrNotFound when missing.
func (s *OAuthStore) get(ctx context.Context, kind, signature string, session fosite.Session) (*fosite.Request, bool, error) {
	row := new(oauthToken)
	err := s.conn(ctx).NewSelect().Model(row).Relation("Client").
		Where("oauth_token.kind = ? AND oauth_token.signature = ?", kind, signature).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, fosite.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", kind, err)
	}
	if row.Client == nil || row.Client.ID == "" {
		return nil, false, fosite.ErrNotFound // its client was deleted
	}
	form, err := url.ParseQuery(row.Form)
	if err != nil {
		return nil, false, fmt.Errorf("decode %s form: %w", kind, err)
	}
	if session != nil {
		if err := json.Unmarshal(row.Session, session); err != nil {
			return nil, false, fmt.Errorf("decode %s session: %w", kind, err)
		}
	}
	req := &fosite.Request{
		ID:                row.RequestID,
		RequestedAt:       row.RequestedAt.UTC(),
		Client:            row.Client,
		RequestedScope:    splitScopes(row.RequestedScopes),
		GrantedScope:      splitScopes(row.GrantedScopes),
		Form:              form,
		Session:           session,
		RequestedAudience: fosite.Arguments{},
		GrantedAudience:   fosite.Arguments{},
	}
	return req, row.Active, nil
}

func splitScopes(s string) fosite.Arguments {
	if s == "" {
		return fosite.Arguments{}
	}
	return strings.Fields(s)
}

// deleteBy removes the rows of kind matching one column.
func (s *OAuthStore) deleteBy(ctx context.Context, kind, column, value string) error {
	_, err := s.conn(ctx).NewDelete().Model((*oauthToken)(nil)).
		Where("kind = ? AND ? = ?", kind, bun.Ident(column), value).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("delete %s: %w", kind, err)
	}
	return nil
}

// CreateAuthorizeCodeSession implements oauth2.AuthorizeCodeStorage.
func (s *OAuthStore) CreateAuthorizeCodeSession(ctx context.Context, signature string, req fosite.Requester) error {
	return s.create(ctx, tokenKindCode, signature, fosite.AuthorizeCode, req)
}

// GetAuthorizeCodeSession implements oauth2.AuthorizeCodeStorage. A used
// code returns its request together with fosite.ErrInvalidatedAuthorizeCode,
// so that fosite can revoke what the first use produced.
func (s *OAuthStore) GetAuthorizeCodeSession(ctx context.Context, signature string, session fosite.Session) (fosite.Requester, error) {
	req, active, err := s.get(ctx, tokenKindCode, signature, session)
	if err != nil {
		return nil, err
	}
	if !active {
		return req, fosite.ErrInvalidatedAuthorizeCode
	}
	return req, nil
}

// InvalidateAuthorizeCodeSession implements oauth2.AuthorizeCodeStorage:
// the code is kept, marked used. A code already used (a concurrent exchange
// won) gives fosite.ErrInvalidatedAuthorizeCode.
func (s *OAuthStore) InvalidateAuthorizeCodeSession(ctx context.Context, signature string) error {
	res, err := s.conn(ctx).NewUpdate().Model((*oauthToken)(nil)).
		Set("active = ?", false).
		Where("kind = ? AND signature = ? AND active = ?", tokenKindCode, signature, true).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("invalidate authorization code: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fosite.ErrInvalidatedAuthorizeCode
	}
	return nil
}

// CreateAccessTokenSession implements oauth2.AccessTokenStorage.
func (s *OAuthStore) CreateAccessTokenSession(ctx context.Context, signature string, req fosite.Requester) error {
	return s.create(ctx, tokenKindAccess, signature, fosite.AccessToken, req)
}

// GetAccessTokenSession implements oauth2.AccessTokenStorage.
func (s *OAuthStore) GetAccessTokenSession(ctx context.Context, signature string, session fosite.Session) (fosite.Requester, error) {
	req, _, err := s.get(ctx, tokenKindAccess, signature, session)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DeleteAccessTokenSession implements oauth2.AccessTokenStorage.
func (s *OAuthStore) DeleteAccessTokenSession(ctx context.Context, signature string) error {
	return s.deleteBy(ctx, tokenKindAccess, "signature", signature)
}

// CreateRefreshTokenSession implements oauth2.RefreshTokenStorage. When the
// user then holds more than RefreshTokensPerUser refresh tokens, the oldest
// are deleted, in use or not; the access tokens made from them run out on
// their own.
func (s *OAuthStore) CreateRefreshTokenSession(ctx context.Context, signature, _ string, req fosite.Requester) error {
	row, err := newTokenRow(tokenKindRefresh, signature, fosite.RefreshToken, req)
	if err != nil {
		return err
	}
	db := s.conn(ctx)
	if _, err := db.NewInsert().Model(row).Exec(ctx); err != nil {
		return fmt.Errorf("store refresh token: %w", err)
	}
	return trimRefreshTokens(ctx, db, row.UserID)
}

// trimRefreshTokens keeps the user's RefreshTokensPerUser newest refresh
// tokens and deletes the rest.
func trimRefreshTokens(ctx context.Context, db bun.IDB, userID int64) error {
	var cutoff []int64
	err := db.NewSelect().Model((*oauthToken)(nil)).Column("seq").
		Where("kind = ? AND user_id = ?", tokenKindRefresh, userID).
		OrderExpr("seq DESC").Offset(RefreshTokensPerUser-1).Limit(1).
		Scan(ctx, &cutoff)
	if err != nil {
		return fmt.Errorf("find the user's oldest refresh tokens: %w", err)
	}
	if len(cutoff) == 0 {
		return nil
	}
	_, err = db.NewDelete().Model((*oauthToken)(nil)).
		Where("kind = ? AND user_id = ? AND seq < ?", tokenKindRefresh, userID, cutoff[0]).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("delete the user's oldest refresh tokens: %w", err)
	}
	return nil
}

// GetRefreshTokenSession implements oauth2.RefreshTokenStorage.
func (s *OAuthStore) GetRefreshTokenSession(ctx context.Context, signature string, session fosite.Session) (fosite.Requester, error) {
	req, active, err := s.get(ctx, tokenKindRefresh, signature, session)
	if err != nil {
		return nil, err
	}
	if !active {
		return req, fosite.ErrInactiveToken
	}
	return req, nil
}

// DeleteRefreshTokenSession implements oauth2.RefreshTokenStorage.
func (s *OAuthStore) DeleteRefreshTokenSession(ctx context.Context, signature string) error {
	return s.deleteBy(ctx, tokenKindRefresh, "signature", signature)
}

// RotateRefreshToken implements oauth2.RefreshTokenStorage: the refresh
// token of the request is deleted, and the access tokens made from it.
// (The service's own refresh grant does not rotate; see api/oauth.)
func (s *OAuthStore) RotateRefreshToken(ctx context.Context, requestID, _ string) error {
	if err := s.RevokeRefreshToken(ctx, requestID); err != nil {
		return err
	}
	return s.RevokeAccessToken(ctx, requestID)
}

// RevokeRefreshToken implements oauth2.TokenRevocationStorage: every refresh
// token of the request is deleted.
func (s *OAuthStore) RevokeRefreshToken(ctx context.Context, requestID string) error {
	return s.deleteBy(ctx, tokenKindRefresh, "request_id", requestID)
}

// RevokeRefreshTokenMaybeGracePeriod implements
// oauth2.TokenRevocationStorage; there is no grace period.
func (s *OAuthStore) RevokeRefreshTokenMaybeGracePeriod(ctx context.Context, requestID, _ string) error {
	return s.RevokeRefreshToken(ctx, requestID)
}

// RevokeAccessToken implements oauth2.TokenRevocationStorage: every access
// token of the request is deleted.
func (s *OAuthStore) RevokeAccessToken(ctx context.Context, requestID string) error {
	return s.deleteBy(ctx, tokenKindAccess, "request_id", requestID)
}

// CreatePKCERequestSession implements pkce.PKCERequestStorage.
func (s *OAuthStore) CreatePKCERequestSession(ctx context.Context, signature string, req fosite.Requester) error {
	return s.create(ctx, tokenKindPKCE, signature, fosite.AuthorizeCode, req)
}

// GetPKCERequestSession implements pkce.PKCERequestStorage.
func (s *OAuthStore) GetPKCERequestSession(ctx context.Context, signature string, session fosite.Session) (fosite.Requester, error) {
	req, _, err := s.get(ctx, tokenKindPKCE, signature, session)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DeletePKCERequestSession implements pkce.PKCERequestStorage.
func (s *OAuthStore) DeletePKCERequestSession(ctx context.Context, signature string) error {
	return s.deleteBy(ctx, tokenKindPKCE, "signature", signature)
}

// CountRefreshTokens returns how many refresh tokens the user holds.
func (s *OAuthStore) CountRefreshTokens(ctx context.Context, userID int64) (int, error) {
	n, err := s.db.NewSelect().Model((*oauthToken)(nil)).
		Where("kind = ? AND user_id = ?", tokenKindRefresh, userID).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("count refresh tokens: %w", err)
	}
	return int(n), nil
}

// PurgeExpired deletes codes, access tokens and PKCE challenges that expired
// before the given time, and returns how many. Refresh tokens never expire.
func (s *OAuthStore) PurgeExpired(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.NewDelete().Model((*oauthToken)(nil)).
		Where("expires_at IS NOT NULL AND expires_at < ?", before.UTC()).
		Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("purge expired OAuth tokens: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
