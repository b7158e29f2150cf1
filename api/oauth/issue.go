package oauth

import (
	"context"
	"fmt"
	"time"

	"github.com/ory/fosite"

	"iam/models"
	"iam/models/oauthstore"
)

// IssueRequest asks for tokens without the browser flow: for the self client
// (`iam token`), back-end tasks, scripts and tests.
type IssueRequest struct {
	// ClientID is the client the tokens are issued to, of OrgID.
	ClientID string
	OrgID    int64
	UserID   int64
	// Scopes are svc.<resource>.<OPERATION> scopes; the user must be allowed
	// them (an active admin).
	Scopes []string
	// Offline adds a refresh token, as access_type=offline does.
	Offline bool
}

// IssueToken issues an access token (and with Offline a refresh token) as
// the token endpoint would after a consent, and returns the token endpoint's
// answer. EINVALID for an unknown scope or a service client; ENOTFOUND for an unknown client or
// user; EFORBIDDEN when the user may not hold the scopes.
func (s *Server) IssueToken(ctx context.Context, in IssueRequest) (*TokenResponse, error) {
	client, err := s.clients.Get(ctx, in.ClientID)
	if err != nil {
		return nil, err
	}
	if client.OrgID != in.OrgID {
		return nil, oauthstore.ErrClientNotFound
	}
	if client.Type == oauthstore.ClientService {
		return nil, models.Invalid("client_id", "a service client acts for no user: it gets its tokens with grant_type=client_credentials")
	}
	user, err := s.users.Get(ctx, in.OrgID, in.UserID)
	if err != nil {
		return nil, err
	}
	if len(in.Scopes) == 0 {
		return nil, models.Invalid("scopes", "at least one scope is required")
	}
	for _, scope := range in.Scopes {
		if !knownScope(scope) {
			return nil, models.Invalid("scopes", "%q is not a known scope (svc.<resource>.<READ|CREATE|UPDATE|DELETE|WRITE|ALL>)", scope)
		}
	}
	if refusal := grantRefusal(user, in.Scopes, s.cfg.Now()); refusal != nil {
		return nil, &models.Error{Code: models.EFORBIDDEN, Title: "Access Denied", Detail: refusal.GetDescription()}
	}

	sess := newSession(user)
	sess.SetExpiresAt(fosite.AccessToken, time.Now().UTC().Add(s.cfg.AccessTokenLifespan).Round(time.Second))
	req := fosite.NewAccessRequest(sess)
	req.Client = fositeClient{client}
	req.GrantTypes = fosite.Arguments{"self_client"}
	scopes := append([]string(nil), in.Scopes...)
	if in.Offline {
		scopes = append(scopes, offlineScope)
	}
	req.SetRequestedScopes(scopes)
	for _, scope := range scopes {
		req.GrantScope(scope)
	}

	access, accessSig, err := s.strategy.GenerateAccessToken(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("generate access token: %w", err)
	}
	var refresh, refreshSig string
	if in.Offline {
		if refresh, refreshSig, err = s.strategy.GenerateRefreshToken(ctx, req); err != nil {
			return nil, fmt.Errorf("generate refresh token: %w", err)
		}
	}
	stored := req.Sanitize(nil)
	// The tokens' oauth.token.issued events name the client their actor,
	// as the token endpoint's do.
	if err := s.tokens.InTx(asClient(ctx, req.Client), func(ctx context.Context) error {
		if err := s.tokens.CreateAccessTokenSession(ctx, accessSig, stored); err != nil {
			return err
		}
		if refreshSig != "" {
			return s.tokens.CreateRefreshTokenSession(ctx, refreshSig, accessSig, stored)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	resp := s.tokenResponse(access, refresh, req.GetGrantedScopes())
	return &resp, nil
}
