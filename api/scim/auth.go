package scim

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"iam/api/auth"
	"iam/models"
	"iam/models/audit"
	mscim "iam/models/scim"
)

const ctxPrincipal = "iam.scim.principal"

// Scope words of the svc.scim resource: READ for GETs and searches, WRITE
// (or CREATE, UPDATE, DELETE) for changes, ALL for both.
var (
	readScopes  = auth.Scopes("scim", "READ", "ALL")
	writeScopes = auth.Scopes("scim", "WRITE", "CREATE", "UPDATE", "DELETE", "ALL")
)

// ProvisioningActorType is the actor type of a provisioning token's
// changes: a client of the service.
const ProvisioningActorType = models.ActorClient

// bearer returns the token of "Authorization: Bearer <token>" (the
// /api/v1 scheme, Service-oauthtoken, is accepted too).
func bearer(r *http.Request) (string, bool) {
	q := r.URL.Query()
	if q.Has("access_token") || q.Has("token") {
		return "", false
	}
	scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !found || token == "" || !strings.EqualFold(scheme, "Bearer") && scheme != auth.Scheme {
		return "", false
	}
	return token, true
}

// authenticate checks the request's bearer token: a provisioning token
// (svc.scim.ALL of its organization), or an OAuth access token, a user's or
// a service client's own (client credentials, when the validator is an
// auth.ClientTokenValidator; the client is then the actor), that must
// hold a svc.scim scope allowing the route (403 otherwise, recorded as
// access.denied). 401 for a missing, unknown, expired or revoked token;
// 503 when it cannot be checked now. It makes the token the actor of the
// request's changes.
func (s *Server) authenticate(write bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		token, ok := bearer(c.Request)
		if !ok {
			c.Header("WWW-Authenticate", `Bearer realm="scim"`)
			s.abort(c, &models.Error{Code: models.EUNAUTHORIZED})
			return
		}
		var (
			p     *auth.Principal
			actor models.Actor
		)
		if strings.HasPrefix(token, mscim.TokenPrefix) {
			t, err := s.store.ProvisioningTokens.Authenticate(c.Request.Context(), token)
			if err != nil {
				if !models.IsUnavailable(err) {
					err = &models.Error{Code: models.EUNAUTHORIZED}
				}
				s.abort(c, err)
				return
			}
			p = &auth.Principal{Name: t.Name, OrgID: t.OrgID, ClientID: "provisioning_token:" + models.FormatID(t.ID), Scopes: t.ScopeList()}
			actor = models.Actor{Type: ProvisioningActorType, ID: p.ClientID, DisplayName: t.Name}
		} else {
			if s.tokens == nil {
				s.abort(c, &models.Error{Code: models.EUNAUTHORIZED})
				return
			}
			var err error
			if clients, ok := s.tokens.(auth.ClientTokenValidator); ok {
				p, err = clients.ValidateClientAccessToken(c.Request.Context(), token)
			} else {
				p, err = s.tokens.ValidateAccessToken(c.Request.Context(), token)
			}
			if err != nil || p == nil {
				if !models.IsUnavailable(err) {
					err = &models.Error{Code: models.EUNAUTHORIZED}
				}
				s.abort(c, err)
				return
			}
			actor = models.Actor{Type: models.ActorUser, ID: models.FormatID(p.UserID), DisplayName: p.Name}
			if p.UserID == 0 {
				actor = models.Actor{Type: models.ActorClient, ID: p.ClientID, DisplayName: p.Name}
			}
		}
		need := readScopes
		if write {
			need = writeScopes
		}
		if !auth.Allows(p.Scopes, need) {
			s.refuse(c.Request.Context(), p, c.Request.Method+" "+c.FullPath(), need)
			s.abort(c, &models.Error{Code: models.EFORBIDDEN, Detail: "the token's scopes do not allow this operation: it needs one of " + strings.Join(need, ", ")})
			return
		}
		o := models.OriginOf(c.Request.Context())
		o.Actor = actor
		c.Request = c.Request.WithContext(models.WithOrigin(c.Request.Context(), o))
		c.Set(ctxPrincipal, p)
		c.Next()
	}
}

// refuse records access.denied for a token without the scopes a route
// needs (rate-bounded, outside any transaction; as /api/v1 does).
func (s *Server) refuse(ctx context.Context, p *auth.Principal, route string, need []string) {
	if s.store == nil || s.store.Refusals == nil {
		return
	}
	err := s.store.Refusals.Record(ctx, models.AuditEvent{OrgID: p.OrgID, Type: audit.AccessDenied,
		Targets: []models.EventTarget{{Type: "route", ID: route, DisplayName: route}}, Result: models.ResultDenied,
		Reason: "the token holds none of the scopes " + strings.Join(need, ", ")})
	if err != nil {
		s.log.WarnContext(ctx, "record access.denied", "error", err)
	}
}

// orgOf returns the organization of the request's token.
func orgOf(c *gin.Context) int64 {
	return c.MustGet(ctxPrincipal).(*auth.Principal).OrgID
}
