package oauth

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
	fositestorage "github.com/ory/fosite/storage"

	"iam/models"
	"iam/models/oauthstore"
)

// fositeClient is a registered client as fosite sees it.
type fositeClient struct{ *oauthstore.OAuthClient }

var _ fosite.Client = fositeClient{}

// GetID implements fosite.Client.
func (c fositeClient) GetID() string { return c.ID }

// GetHashedSecret implements fosite.Client.
func (c fositeClient) GetHashedSecret() []byte { return []byte(c.SecretHash) }

// GetRedirectURIs implements fosite.Client.
func (c fositeClient) GetRedirectURIs() []string { return c.RedirectURIs }

// GetGrantTypes implements fosite.Client: the authorization code and its
// refresh tokens; for a service client, client_credentials only.
func (c fositeClient) GetGrantTypes() fosite.Arguments {
	if c.Type == oauthstore.ClientService {
		return fosite.Arguments{"client_credentials"}
	}
	return fosite.Arguments{"authorization_code", "refresh_token"}
}

// GetResponseTypes implements fosite.Client: code; none for a service
// client, which never sends a user to the authorization endpoint.
func (c fositeClient) GetResponseTypes() fosite.Arguments {
	if c.Type == oauthstore.ClientService {
		return fosite.Arguments{}
	}
	return fosite.Arguments{"code"}
}

// GetScopes implements fosite.Client: a service client's registered scopes
// (scopeStrategy holds its requests to them). Any other client may ask for
// every scope; what is granted depends on the user (grantRefusal).
func (c fositeClient) GetScopes() fosite.Arguments {
	if c.Type == oauthstore.ClientService {
		return c.Scopes
	}
	return nil
}

// IsPublic implements fosite.Client.
func (c fositeClient) IsPublic() bool { return c.Type.Public() }

// GetAudience implements fosite.Client.
func (c fositeClient) GetAudience() fosite.Arguments { return nil }

// storage is fosite's storage over the store's OAuth clients and tokens:
// clients (read only here), authorization codes, access and refresh tokens
// and PKCE challenges. A request's session must carry the user id as its
// subject (GetSubject, a digit string), or none for a service client's own
// token, and is stored as JSON.
type storage struct {
	tokens  *oauthstore.OAuthTokenStore
	clients *oauthstore.ClientStore
}

var (
	_ fosite.Storage                = (*storage)(nil)
	_ oauth2.CoreStorage            = (*storage)(nil)
	_ oauth2.TokenRevocationStorage = (*storage)(nil)
	_ pkce.PKCERequestStorage       = (*storage)(nil)
	_ fositestorage.Transactional   = (*storage)(nil)
)

// txKey holds the token transaction BeginTX opened in a context: fosite
// passes a transaction from step to step in the context.
type txKey struct{}

// conn returns the transaction of ctx, or the store.
func (s *storage) conn(ctx context.Context) *oauthstore.OAuthTokenStore {
	if tx, ok := ctx.Value(txKey{}).(*oauthstore.OAuthTokenTx); ok {
		return &tx.OAuthTokenStore
	}
	return s.tokens
}

// BeginTX implements storage.Transactional: the storage's methods called
// with the returned context run in the transaction, and the audit events
// they record (oauth.token.issued, oauth.token.revoked) collect in that
// context until Commit writes them in the transaction
// (oauthstore.OAuthTokenTx, sqldb.CommitWithEvents): fosite's transaction
// is the one the store's sqldb.InTx cannot run.
func (s *storage) BeginTX(ctx context.Context) (context.Context, error) {
	txCtx, tx, err := s.tokens.Begin(ctx)
	if err != nil {
		return ctx, err
	}
	return context.WithValue(txCtx, txKey{}, tx), nil
}

// Commit implements storage.Transactional: the transaction's writes and
// their audit events commit together.
func (s *storage) Commit(ctx context.Context) error {
	tx, ok := ctx.Value(txKey{}).(*oauthstore.OAuthTokenTx)
	if !ok {
		return errors.New("commit: no OAuth transaction in the context")
	}
	return tx.Commit(ctx)
}

// Rollback implements storage.Transactional.
func (s *storage) Rollback(ctx context.Context) error {
	tx, ok := ctx.Value(txKey{}).(*oauthstore.OAuthTokenTx)
	if !ok {
		return errors.New("roll back: no OAuth transaction in the context")
	}
	return tx.Rollback()
}

// InTx runs fn with a context whose storage calls share one transaction.
func (s *storage) InTx(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	ctx, err = s.BeginTX(ctx)
	if err != nil {
		return err
	}
	if err := fn(ctx); err != nil {
		if rbErr := s.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return fmt.Errorf("%w (and rolling back: %w)", err, rbErr)
		}
		return err
	}
	return s.Commit(ctx)
}

// GetClient implements fosite.ClientManager. fosite.ErrNotFound when
// missing.
func (s *storage) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	if id == "" {
		return nil, fosite.ErrNotFound
	}
	client, err := s.clients.Get(ctx, id)
	if models.ErrorCode(err) == models.ENOTFOUND {
		return nil, fosite.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return fositeClient{client}, nil
}

// ClientAssertionJWTValid implements fosite.ClientManager. JWT client
// assertions are not supported: every one is refused.
func (s *storage) ClientAssertionJWTValid(context.Context, string) error {
	return fosite.ErrJTIKnown
}

// SetClientAssertionJWT implements fosite.ClientManager; not supported.
func (s *storage) SetClientAssertionJWT(context.Context, string, time.Time) error {
	return errors.New("JWT client assertions are not supported")
}

// create stores req under (kind, signature), expiring when its session
// says for tokenType (never when zero).
func (s *storage) create(ctx context.Context, kind oauthstore.OAuthTokenKind, signature string, tokenType fosite.TokenType, req fosite.Requester) error {
	row, err := newTokenRow(kind, signature, tokenType, req)
	if err != nil {
		return err
	}
	return s.conn(ctx).Create(ctx, row)
}

func newTokenRow(kind oauthstore.OAuthTokenKind, signature string, tokenType fosite.TokenType, req fosite.Requester) (*oauthstore.OAuthToken, error) {
	client, ok := req.GetClient().(fositeClient)
	if !ok {
		return nil, fmt.Errorf("store %s: the request's client is %T, not a registered client", kind, req.GetClient())
	}
	sess := req.GetSession()
	if sess == nil {
		return nil, fmt.Errorf("store %s: the request has no session", kind)
	}
	// A service client's token acts for the client: it has no user (a NULL
	// user_id); every other token acts for its user.
	var userID int64
	if client.Type == oauthstore.ClientService {
		if sess.GetSubject() != "" {
			return nil, fmt.Errorf("store %s: a service client's token has no user, but its session names %q", kind, sess.GetSubject())
		}
	} else {
		var err error
		userID, err = strconv.ParseInt(sess.GetSubject(), 10, 64)
		if err != nil || userID <= 0 {
			return nil, fmt.Errorf("store %s: the session's subject %q is no user id", kind, sess.GetSubject())
		}
	}
	doc, err := json.Marshal(sess)
	if err != nil {
		return nil, fmt.Errorf("store %s: encode session: %w", kind, err)
	}
	row := &oauthstore.OAuthToken{
		Kind:            kind,
		Signature:       signature,
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
func (s *storage) get(ctx context.Context, kind oauthstore.OAuthTokenKind, signature string, session fosite.Session) (*fosite.Request, bool, error) {
	row, err := s.conn(ctx).Get(ctx, kind, signature)
	if models.ErrorCode(err) == models.ENOTFOUND {
		return nil, false, fosite.ErrNotFound
	}
	if err != nil {
		return nil, false, err
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
		Client:            fositeClient{row.Client},
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

// CreateAuthorizeCodeSession implements oauth2.AuthorizeCodeStorage.
func (s *storage) CreateAuthorizeCodeSession(ctx context.Context, signature string, req fosite.Requester) error {
	return s.create(ctx, oauthstore.OAuthCode, signature, fosite.AuthorizeCode, req)
}

// GetAuthorizeCodeSession implements oauth2.AuthorizeCodeStorage. A used
// code returns its request together with fosite.ErrInvalidatedAuthorizeCode,
// so that fosite can revoke what the first use produced.
func (s *storage) GetAuthorizeCodeSession(ctx context.Context, signature string, session fosite.Session) (fosite.Requester, error) {
	req, active, err := s.get(ctx, oauthstore.OAuthCode, signature, session)
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
func (s *storage) InvalidateAuthorizeCodeSession(ctx context.Context, signature string) error {
	ok, err := s.conn(ctx).Deactivate(ctx, oauthstore.OAuthCode, signature)
	if err != nil {
		return err
	}
	if !ok {
		return fosite.ErrInvalidatedAuthorizeCode
	}
	return nil
}

// CreateAccessTokenSession implements oauth2.AccessTokenStorage.
func (s *storage) CreateAccessTokenSession(ctx context.Context, signature string, req fosite.Requester) error {
	return s.create(ctx, oauthstore.OAuthAccess, signature, fosite.AccessToken, req)
}

// GetAccessTokenSession implements oauth2.AccessTokenStorage.
func (s *storage) GetAccessTokenSession(ctx context.Context, signature string, session fosite.Session) (fosite.Requester, error) {
	req, _, err := s.get(ctx, oauthstore.OAuthAccess, signature, session)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DeleteAccessTokenSession implements oauth2.AccessTokenStorage.
func (s *storage) DeleteAccessTokenSession(ctx context.Context, signature string) error {
	return s.conn(ctx).Delete(ctx, oauthstore.OAuthAccess, signature)
}

// CreateRefreshTokenSession implements oauth2.RefreshTokenStorage. When the
// user then holds more than models.RefreshTokensPerUser refresh tokens, the
// oldest are deleted (OAuthTokenStore.Create).
func (s *storage) CreateRefreshTokenSession(ctx context.Context, signature, _ string, req fosite.Requester) error {
	return s.create(ctx, oauthstore.OAuthRefresh, signature, fosite.RefreshToken, req)
}

// GetRefreshTokenSession implements oauth2.RefreshTokenStorage.
func (s *storage) GetRefreshTokenSession(ctx context.Context, signature string, session fosite.Session) (fosite.Requester, error) {
	req, active, err := s.get(ctx, oauthstore.OAuthRefresh, signature, session)
	if err != nil {
		return nil, err
	}
	if !active {
		return req, fosite.ErrInactiveToken
	}
	return req, nil
}

// DeleteRefreshTokenSession implements oauth2.RefreshTokenStorage.
func (s *storage) DeleteRefreshTokenSession(ctx context.Context, signature string) error {
	return s.conn(ctx).Delete(ctx, oauthstore.OAuthRefresh, signature)
}

// RotateRefreshToken implements oauth2.RefreshTokenStorage: the refresh
// token of the request is deleted, and the access tokens made from it.
// (The service's own refresh grant does not rotate; see refresh.go.)
func (s *storage) RotateRefreshToken(ctx context.Context, requestID, _ string) error {
	if err := s.RevokeRefreshToken(ctx, requestID); err != nil {
		return err
	}
	return s.RevokeAccessToken(ctx, requestID)
}

// RevokeRefreshToken implements oauth2.TokenRevocationStorage: every refresh
// token of the request is deleted.
func (s *storage) RevokeRefreshToken(ctx context.Context, requestID string) error {
	return s.conn(ctx).DeleteRequest(ctx, oauthstore.OAuthRefresh, requestID)
}

// RevokeRefreshTokenMaybeGracePeriod implements
// oauth2.TokenRevocationStorage; there is no grace period.
func (s *storage) RevokeRefreshTokenMaybeGracePeriod(ctx context.Context, requestID, _ string) error {
	return s.RevokeRefreshToken(ctx, requestID)
}

// RevokeAccessToken implements oauth2.TokenRevocationStorage: every access
// token of the request is deleted.
func (s *storage) RevokeAccessToken(ctx context.Context, requestID string) error {
	return s.conn(ctx).DeleteRequest(ctx, oauthstore.OAuthAccess, requestID)
}

// revokeGrant deletes the refresh token of the request and every access
// token made from it, recording one oauth.token.revoked.
func (s *storage) revokeGrant(ctx context.Context, requestID string) error {
	return s.conn(ctx).DeleteGrant(ctx, requestID)
}

// CreatePKCERequestSession implements pkce.PKCERequestStorage.
func (s *storage) CreatePKCERequestSession(ctx context.Context, signature string, req fosite.Requester) error {
	return s.create(ctx, oauthstore.OAuthPKCE, signature, fosite.AuthorizeCode, req)
}

// GetPKCERequestSession implements pkce.PKCERequestStorage.
func (s *storage) GetPKCERequestSession(ctx context.Context, signature string, session fosite.Session) (fosite.Requester, error) {
	req, _, err := s.get(ctx, oauthstore.OAuthPKCE, signature, session)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DeletePKCERequestSession implements pkce.PKCERequestStorage.
func (s *storage) DeletePKCERequestSession(ctx context.Context, signature string) error {
	return s.conn(ctx).Delete(ctx, oauthstore.OAuthPKCE, signature)
}
