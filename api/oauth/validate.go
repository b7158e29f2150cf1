package oauth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/ory/fosite"

	"iam/api/auth"
	"iam/models"
	"iam/models/oauthstore"
)

// errInvalidToken is every refusal of ValidateAccessToken; the API answers
// it with 401 Unauthorized whatever the reason.
var errInvalidToken = errors.New("the access token is missing, malformed, expired or revoked")

var (
	_ auth.TokenValidator       = (*Server)(nil)
	_ auth.ClientTokenValidator = (*Server)(nil)
)

// tokenUnchecked is the answer when the store could not be asked about a
// token (the database is down): EUNAVAILABLE, which the API answers with 503
// and Retry-After. The token may well be valid; the client must keep it.
func tokenUnchecked(err error) error {
	var rfc *fosite.RFC6749Error
	if errors.As(err, &rfc) && rfc.Cause() != nil {
		err = rfc.Cause() // the store's error, for the logs
	}
	return fmt.Errorf("%w (%w)", &models.Error{Code: models.EUNAVAILABLE, Title: "Service Unavailable",
		Detail: "the token could not be checked now; retry after the time in Retry-After with the same token"}, err)
}

// ValidateAccessToken implements auth.TokenValidator by introspecting the
// HMAC access token: its signature must be right, its row present (not
// revoked) and its expiry ahead, and its user may still use it
// (checkTokenUser). A refresh token is refused, and so is a service
// client's own token, which has no user (/api/v1 acts for users only). The
// principal carries the token's user, organization, client and scopes.
func (s *Server) ValidateAccessToken(ctx context.Context, token string) (*auth.Principal, error) {
	p, err := s.validate(ctx, token)
	if err != nil {
		return nil, err
	}
	if p.UserID == 0 {
		return nil, errInvalidToken
	}
	return p, nil
}

// ValidateClientAccessToken implements auth.ClientTokenValidator: what
// ValidateAccessToken accepts, and the access tokens of the client
// credentials grant, whose principal is the service client (UserID 0, Name
// the client's name). Such a token is refused once its client is deleted
// (which deletes its tokens too), expired or revoked; it holds the scopes
// the client's registration still allows.
func (s *Server) ValidateClientAccessToken(ctx context.Context, token string) (*auth.Principal, error) {
	return s.validate(ctx, token)
}

// validate introspects an access token and returns its principal.
func (s *Server) validate(ctx context.Context, token string) (*auth.Principal, error) {
	use, ar, err := s.provider.IntrospectToken(ctx, token, fosite.AccessToken, new(Session))
	if err != nil {
		if models.IsUnavailable(err) {
			return nil, tokenUnchecked(err)
		}
		if !expectedRefusal(err) {
			s.log.ErrorContext(ctx, "validate access token", "error", err, "cause", fmtCause(err))
		}
		return nil, errInvalidToken
	}
	if use != fosite.AccessToken {
		return nil, errInvalidToken
	}
	sess, ok := ar.GetSession().(*Session)
	if !ok || sess.OrgID == 0 {
		return nil, errInvalidToken
	}
	if sess.UserID == 0 {
		return clientPrincipal(ar, sess)
	}
	user, err := s.checkTokenUser(ctx, sess, ar.GetGrantedScopes())
	if err != nil {
		if models.IsUnavailable(err) {
			return nil, tokenUnchecked(err)
		}
		if !errors.Is(err, errTokenUserRefused) {
			s.log.ErrorContext(ctx, "check the token's user", "error", err)
		}
		return nil, errInvalidToken
	}
	name := user.DisplayName
	if name == "" {
		name = user.Email
	}
	return &auth.Principal{
		Name:     name,
		UserID:   sess.UserID,
		OrgID:    sess.OrgID,
		ClientID: ar.GetClient().GetID(),
		Scopes:   withoutOffline(ar.GetGrantedScopes()),
	}, nil
}

// clientPrincipal is the principal of a token without a user: it must be a
// service client's, of the session's organization (the client was read
// with the token's row: a deleted client's token is not found). Its scopes
// are those granted that the client's registration allows.
func clientPrincipal(ar fosite.Requester, sess *Session) (*auth.Principal, error) {
	client, ok := ar.GetClient().(fositeClient)
	if !ok || client.OAuthClient == nil || client.Type != oauthstore.ClientService || client.OrgID != sess.OrgID {
		return nil, errInvalidToken
	}
	var scopes []string
	for _, scope := range ar.GetGrantedScopes() {
		if auth.Allows(client.Scopes, []string{scope}) {
			scopes = append(scopes, scope)
		}
	}
	return &auth.Principal{Name: client.Name, OrgID: sess.OrgID, ClientID: client.ID, Scopes: scopes}, nil
}

// expectedRefusal reports whether err is one of the ordinary reasons to
// refuse a token, as opposed to a failure of the store.
func expectedRefusal(err error) bool {
	for _, e := range []error{fosite.ErrNotFound, fosite.ErrTokenExpired, fosite.ErrTokenSignatureMismatch, fosite.ErrInvalidTokenFormat, fosite.ErrInactiveToken} {
		if errors.Is(err, e) {
			return true
		}
	}
	var corrupt base64.CorruptInputError
	if errors.As(err, &corrupt) {
		return true // a token that is not base64
	}
	var rfc *fosite.RFC6749Error
	if errors.As(err, &rfc) && rfc.Cause() != nil {
		return expectedRefusal(rfc.Cause())
	}
	return false
}

func fmtCause(err error) string {
	var rfc *fosite.RFC6749Error
	if errors.As(err, &rfc) && rfc.Cause() != nil {
		return rfc.Cause().Error()
	}
	return ""
}
