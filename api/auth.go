package api

import (
	"context"
	"strings"

	"github.com/gin-gonic/gin"

	"iam/models"
)

// Principal is who makes a request: the user and organization behind its
// token, and the scopes the token holds.
type Principal struct {
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

// AuthScheme is the only accepted authorization scheme (spec 5, rule 4).
const AuthScheme = "Service-oauthtoken"

// authenticate accepts a token only as "Authorization: Service-oauthtoken
// <token>". A token in the query string, another scheme, or an invalid token
// gets 401 Unauthorized.
func authenticate(tokens TokenValidator) gin.HandlerFunc {
	return func(c *gin.Context) {
		q := c.Request.URL.Query()
		if q.Has("access_token") || q.Has("token") {
			abortWithError(c, errUnauthorized())
			return
		}
		scheme, token, ok := strings.Cut(c.GetHeader("Authorization"), " ")
		token = strings.TrimSpace(token)
		if !ok || scheme != AuthScheme || token == "" {
			abortWithError(c, errUnauthorized())
			return
		}
		if tokens == nil { // no token source configured: nothing is valid
			abortWithError(c, errUnauthorized())
			return
		}
		p, err := tokens.ValidateAccessToken(c.Request.Context(), token)
		if models.IsUnavailable(err) {
			abortWithError(c, err)
			return
		}
		if err != nil || p == nil {
			abortWithError(c, errUnauthorized())
			return
		}
		c.Set(ctxPrincipal, p)
		c.Set(ctxLogger, logger(c).With("org_id", p.OrgID, "user_id", p.UserID))
		c.Next()
	}
}

// requireScopes lets the request through when the token holds any one of
// scopes, and answers 403 Access Denied otherwise.
func requireScopes(scopes []string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !Allows(principal(c).Scopes, scopes) {
			abortWithError(c, errAccessDenied("the token's scopes do not allow this operation"))
			return
		}
		c.Next()
	}
}

// principal returns the authenticated caller. Every /api/v1 handler runs
// behind authenticate, so it is always there.
func principal(c *gin.Context) *Principal {
	return c.MustGet(ctxPrincipal).(*Principal)
}
