package api

import (
	"strings"

	"github.com/gin-gonic/gin"

	"iam/api/auth"
	"iam/models"
	"iam/models/audit"
)

// authenticate accepts a token only as "Authorization: Service-oauthtoken
// <token>" (auth.Token). A token in the query string, another scheme, or an
// invalid token gets 401 Unauthorized; a token that cannot be checked now,
// 503 with Retry-After.
//
// A 401 writes no audit event: a missing, malformed, unknown or expired
// token names no organization whose log could hold it, and the validator
// answers a refused token without saying whose it was (telling a revoked
// token or a deactivated user's from the others would need it to answer
// more than yes or no, for every refusal; not done). They are counted in
// the access log and the HTTP metrics.
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
		if err != nil || p == nil || p.UserID == 0 {
			// A token without a user (a service client's own) is
			// /scim/v2's only: every /api/v1 route acts for a user.
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
// scopes (auth.Allows), and answers 403 Access Denied otherwise. A 403 is
// recorded as access.denied (a refusal: outside any transaction,
// rate-bounded per organization; refusals nil records nothing), its actor
// the token's user, its target the route ("GET /api/v1/users/{user_id}"),
// its reason the scopes the route needed.
func requireScopes(refusals *audit.RefusalLog, route string, scopes []string) gin.HandlerFunc {
	reason := "the token holds none of the scopes " + strings.Join(scopes, ", ")
	target := models.EventTarget{Type: RouteTargetType, ID: route, DisplayName: route}
	return func(c *gin.Context) {
		p := principal(c)
		if !auth.Allows(p.Scopes, scopes) {
			if refusals != nil {
				err := refusals.Record(c.Request.Context(), models.AuditEvent{OrgID: p.OrgID, Type: audit.AccessDenied,
					Targets: []models.EventTarget{target}, Result: models.ResultDenied, Reason: reason})
				if err != nil {
					logger(c).Warn("record access.denied", "error", err)
				}
			}
			abortWithError(c, errAccessDenied("the token's scopes do not allow this operation"))
			return
		}
		c.Next()
	}
}

// RouteTargetType is the target type of access.denied: a route, named by
// its method and path as the OpenAPI document writes it.
const RouteTargetType = "route"

// routeName names a route of /api/v1 by its method and path, with its
// parameters as the OpenAPI document writes them: "GET
// /api/v1/users/{user_id}".
func routeName(method, path string) string {
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if name, ok := strings.CutPrefix(seg, ":"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return method + " /api/v1" + strings.Join(segs, "/")
}

// Scopes is auth.Scopes, under the short name the routes table uses.
func Scopes(resource string, ops ...string) []string { return auth.Scopes(resource, ops...) }

// principal returns the authenticated caller. Every /api/v1 handler runs
// behind authenticate, so it is always there.
func principal(c *gin.Context) *auth.Principal {
	return c.MustGet(ctxPrincipal).(*auth.Principal)
}
