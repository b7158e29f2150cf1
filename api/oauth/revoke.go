package oauth

import (
	"context"
	"errors"
	"net/http"

	"github.com/ory/fosite"
)

// revoke is POST /oauth/v2/token/revoke (spec 5, step 4; RFC 7009). The
// token parameter is a refresh token, which is revoked with every access
// token made from it, or an access token, which alone is revoked.
//
// The interface names no client credentials for this call, so holding the
// token is enough: revoking is what anyone holding it may want. When the
// request does carry client credentials (form or Basic), they must be right
// and the token must be the client's. An unknown token is answered like a
// revoked one (200), as RFC 7009 asks.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if s.limited(w, r, s.tokenLim, false) {
		return
	}
	ctx := r.Context()
	if err := mergeQueryIntoForm(w, r); err != nil {
		s.writeAccessError(ctx, w, nil, err)
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		s.writeAccessError(ctx, w, nil, fosite.ErrInvalidRequest.WithHint("The token parameter is missing."))
		return
	}
	clientID := ""
	if _, _, basic := r.BasicAuth(); basic || r.PostForm.Get("client_id") != "" {
		client, err := s.provider.AuthenticateClient(ctx, r, r.PostForm)
		if err != nil {
			s.writeAccessError(ctx, w, nil, fosite.ErrInvalidClient.WithWrap(err))
			return
		}
		clientID = client.GetID()
	}
	if err := s.revokeToken(ctx, token, clientID); err != nil {
		s.logRFCError(ctx, "revoke token", err)
		s.writeAccessError(ctx, w, nil, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// revokeToken revokes token, a refresh or an access token, when its HMAC is
// right. clientID, when not empty, must be the token's client. The
// revocation records oauth.token.revoked in its transaction, with the
// token's client as its actor (whoever holds a token acts as its client).
func (s *Server) revokeToken(ctx context.Context, token, clientID string) error {
	fromClient := func(req fosite.Requester) error {
		if clientID != "" && req.GetClient().GetID() != clientID {
			return fosite.ErrUnauthorizedClient.WithHint("The token was issued to another client.")
		}
		return nil
	}
	req, err := s.tokens.GetRefreshTokenSession(ctx, s.strategy.RefreshTokenSignature(ctx, token), new(Session))
	if err == nil && s.strategy.ValidateRefreshToken(ctx, req, token) == nil {
		if err = fromClient(req); err != nil {
			return err
		}
		if err = s.tokens.revokeGrant(asClient(ctx, req.GetClient()), req.GetID()); err != nil {
			return fosite.ErrServerError.WithWrap(err).WithDebug(err.Error())
		}
		return nil
	}
	if err != nil && !errors.Is(err, fosite.ErrNotFound) && !errors.Is(err, fosite.ErrInactiveToken) {
		return fosite.ErrServerError.WithWrap(err).WithDebug(err.Error())
	}
	signature := s.strategy.AccessTokenSignature(ctx, token)
	req, err = s.tokens.GetAccessTokenSession(ctx, signature, new(Session))
	switch {
	case errors.Is(err, fosite.ErrNotFound):
		return nil
	case err != nil:
		return fosite.ErrServerError.WithWrap(err).WithDebug(err.Error())
	}
	// An expired access token is still revoked: its HMAC is what counts.
	if err := s.strategy.ValidateAccessToken(ctx, req, token); err != nil && !errors.Is(err, fosite.ErrTokenExpired) {
		return nil
	}
	if err := fromClient(req); err != nil {
		return err
	}
	if err := s.tokens.DeleteAccessTokenSession(asClient(ctx, req.GetClient()), signature); err != nil {
		return fosite.ErrServerError.WithWrap(err).WithDebug(err.Error())
	}
	return nil
}
