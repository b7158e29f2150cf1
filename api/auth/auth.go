// Package auth is who calls the API and what the caller may do: the
// principal behind an access token, how a request carries its token, the
// scopes a route needs, and the Retry-After of an answer given while a token
// cannot be checked. The API (package api) and the authorization server
// (api/oauth) both import it; it imports neither, so nothing imports upward.
package auth

import (
	"context"
	"net/http"
	"strconv"
	"strings"
)

// Principal is who makes a request: the user and organization behind its
// token, and the scopes the token holds. A service client's own token
// (ClientTokenValidator) has no user: UserID is 0 and Name the client's.
type Principal struct {
	// Name is the user's display name (its email when it has none), as
	// audit events show the actor; a service client's name.
	Name string
	// UserID is never 0 from TokenValidator: every /api/v1 route acts for
	// a user.
	UserID   int64
	OrgID    int64
	ClientID string
	Scopes   []string
}

// TokenValidator checks an access token and returns its principal. It returns
// an error for a token that is unknown, malformed, expired or revoked, and an
// EUNAVAILABLE-coded error (models.IsUnavailable) when the token could not be
// checked: that is answered 503 with Retry-After, never 401, so that clients
// keep their tokens through an outage.
type TokenValidator interface {
	ValidateAccessToken(ctx context.Context, token string) (*Principal, error)
}

// ClientTokenValidator also accepts the access tokens a service client gets
// for itself (the client credentials grant): their Principal names the
// client (ClientID, Name) and no user (UserID 0). Only /scim/v2 asks for
// them; the same token is refused by TokenValidator, so /api/v1 never sees
// a principal without a user.
type ClientTokenValidator interface {
	ValidateClientAccessToken(ctx context.Context, token string) (*Principal, error)
}

// Scheme is the only accepted authorization scheme (spec 5, rule 4).
const Scheme = "Service-oauthtoken"

// Token returns the access token a request carries, accepted only as
// "Authorization: Service-oauthtoken <token>". ok is false for a request
// without one, with another scheme or an empty token, and for one that also
// names a token in its query string (access_token, token): a token there
// may have been logged on the way, and is never accepted.
func Token(r *http.Request) (token string, ok bool) {
	q := r.URL.Query()
	if q.Has("access_token") || q.Has("token") {
		return "", false
	}
	scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !found || scheme != Scheme || token == "" {
		return "", false
	}
	return token, true
}

// RetryAfterSeconds is the Retry-After of every 503 Service Unavailable: a
// dependency (the database, the workflow engine) is down or restarting. The
// client should send the same request again after it, with the same token.
const RetryAfterSeconds = 2

// SetRetryAfter sets the Retry-After of a 503 Service Unavailable.
func SetRetryAfter(h http.Header) {
	h.Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
}
