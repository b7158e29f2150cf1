package oauth

import (
	"context"
	"errors"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"

	"iam/models"
	"iam/models/identity"
)

// refreshHandler is the refresh_token grant of spec 5 (step 3): it issues a
// new access token and no new refresh token. Unlike fosite's own handler it
// does not rotate: a refresh token lives until it is revoked (rule 3), and
// every access token made from it shares its request id, so that revoking
// the refresh token ends them too. The user must still be allowed the
// token's scopes (active, not blocked, admin).
type refreshHandler struct {
	strategy oauth2.CoreStrategy
	store    *storage
	users    *identity.UserStore
	lifespan time.Duration
}

var _ fosite.TokenEndpointHandler = (*refreshHandler)(nil)

// CanHandleTokenEndpointRequest implements fosite.TokenEndpointHandler.
func (h *refreshHandler) CanHandleTokenEndpointRequest(_ context.Context, req fosite.AccessRequester) bool {
	return req.GetGrantTypes().ExactOne("refresh_token")
}

// CanSkipClientAuth implements fosite.TokenEndpointHandler: the client must
// authenticate (public clients with their id alone).
func (h *refreshHandler) CanSkipClientAuth(context.Context, fosite.AccessRequester) bool {
	return false
}

// HandleTokenEndpointRequest implements fosite.TokenEndpointHandler: it
// checks the refresh token and loads its grant into req.
func (h *refreshHandler) HandleTokenEndpointRequest(ctx context.Context, req fosite.AccessRequester) error {
	if !h.CanHandleTokenEndpointRequest(ctx, req) {
		return fosite.ErrUnknownRequest
	}
	if !req.GetClient().GetGrantTypes().Has("refresh_token") {
		return fosite.ErrUnauthorizedClient.WithHint("The client may not use the refresh_token grant.")
	}
	token := req.GetRequestForm().Get("refresh_token")
	if token == "" {
		return fosite.ErrInvalidRequest.WithHint("The refresh_token parameter is missing.")
	}
	orig, err := h.store.GetRefreshTokenSession(ctx, h.strategy.RefreshTokenSignature(ctx, token), req.GetSession())
	switch {
	case errors.Is(err, fosite.ErrNotFound), errors.Is(err, fosite.ErrInactiveToken):
		return fosite.ErrInvalidGrant.WithHint("The refresh token is unknown or was revoked.")
	case err != nil:
		return fosite.ErrServerError.WithWrap(err).WithDebug(err.Error())
	}
	if err = h.strategy.ValidateRefreshToken(ctx, orig, token); err != nil {
		return fosite.ErrInvalidGrant.WithHint("The refresh token is invalid.").WithWrap(err).WithDebug(err.Error())
	}
	if orig.GetClient().GetID() != req.GetClient().GetID() {
		return fosite.ErrInvalidGrant.WithHint("The refresh token was issued to another client.")
	}
	sess, ok := orig.GetSession().(*Session)
	if !ok {
		return fosite.ErrServerError.WithDebug("the refresh token's session is not an oauth.Session")
	}
	user, err := h.users.Get(ctx, sess.OrgID, sess.UserID)
	if models.ErrorCode(err) == models.ENOTFOUND {
		return fosite.ErrInvalidGrant.WithHint("The user of the refresh token no longer exists.")
	}
	if err != nil {
		return fosite.ErrServerError.WithWrap(err).WithDebug(err.Error())
	}
	if refusal := grantRefusal(user, orig.GetGrantedScopes(), time.Now()); refusal != nil {
		return fosite.ErrInvalidGrant.WithHint(refusal.HintField)
	}
	if revokedSince(user, sess.AuthTime) {
		return fosite.ErrInvalidGrant.WithHint("The refresh token was revoked.")
	}

	req.SetID(orig.GetID())
	req.SetSession(sess.Clone())
	req.SetRequestedScopes(orig.GetRequestedScopes())
	for _, scope := range orig.GetGrantedScopes() {
		req.GrantScope(scope)
	}
	req.GetSession().SetExpiresAt(fosite.AccessToken, time.Now().UTC().Add(h.lifespan).Round(time.Second))
	return nil
}

// PopulateTokenEndpointResponse implements fosite.TokenEndpointHandler: a
// new access token under the refresh token's request id.
func (h *refreshHandler) PopulateTokenEndpointResponse(ctx context.Context, req fosite.AccessRequester, resp fosite.AccessResponder) error {
	if !h.CanHandleTokenEndpointRequest(ctx, req) {
		return fosite.ErrUnknownRequest
	}
	access, signature, err := h.strategy.GenerateAccessToken(ctx, req)
	if err != nil {
		return fosite.ErrServerError.WithWrap(err).WithDebug(err.Error())
	}
	if err := h.store.CreateAccessTokenSession(ctx, signature, req.Sanitize(nil)); err != nil {
		return fosite.ErrServerError.WithWrap(err).WithDebug(err.Error())
	}
	resp.SetAccessToken(access)
	resp.SetTokenType("bearer")
	resp.SetExpiresIn(h.lifespan)
	resp.SetScopes(req.GetGrantedScopes())
	return nil
}
