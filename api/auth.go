package api

import (
	"github.com/gin-gonic/gin"

	"iam/api/auth"
	"iam/models"
)

// authenticate accepts a token only as "Authorization: Service-oauthtoken
// <token>" (auth.Token). A token in the query string, another scheme, or an
// invalid token gets 401 Unauthorized; a token that cannot be checked now,
// 503 with Retry-After.
func authenticate(tokens auth.TokenValidator) gin.HandlerFunc {
	return func(c *gin.Context) {
		token, ok := auth.Token(c.Request)
		if !ok {
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
		withActor(c, models.Actor{Type: models.ActorUser, ID: models.FormatID(p.UserID), DisplayName: p.Name})
		c.Set(ctxLogger, logger(c).With("org_id", p.OrgID, "user_id", p.UserID))
		c.Next()
	}
}

// requireScopes lets the request through when the token holds any one of
// scopes (auth.Allows), and answers 403 Access Denied otherwise.
func requireScopes(scopes []string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !auth.Allows(principal(c).Scopes, scopes) {
			abortWithError(c, errAccessDenied("the token's scopes do not allow this operation"))
			return
		}
		c.Next()
	}
}

// Scopes is auth.Scopes, under the short name the routes table uses.
func Scopes(resource string, ops ...string) []string { return auth.Scopes(resource, ops...) }

// principal returns the authenticated caller. Every /api/v1 handler runs
// behind authenticate, so it is always there.
func principal(c *gin.Context) *auth.Principal {
	return c.MustGet(ctxPrincipal).(*auth.Principal)
}
