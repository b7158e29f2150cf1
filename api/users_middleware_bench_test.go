package api

import (
	"context"
	"iam/api/auth"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkMiddleware_UsersRoute measures what each middleware in front of
// GET /api/v1/users costs a request on its own, with a handler that
// answers nothing, and the whole chain: the logger as the service runs it
// (JSON lines) or as the benchmark command runs it (discarded).
func BenchmarkMiddleware_UsersRoute(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	jsonLog := slog.New(slog.NewJSONHandler(io.Discard, nil))
	discard := slog.New(slog.DiscardHandler)
	tokens := principalTokens{p: &auth.Principal{UserID: 1, OrgID: 2, Scopes: []string{"svc.user.READ"}}}
	noop := func(c *gin.Context) { c.Status(http.StatusOK) }
	for _, bc := range []struct {
		name  string
		chain func() []gin.HandlerFunc
	}{
		{"none", func() []gin.HandlerFunc { return nil }},
		{"requestID", func() []gin.HandlerFunc { return []gin.HandlerFunc{requestID(jsonLog)} }},
		{"recoverer", func() []gin.HandlerFunc { return []gin.HandlerFunc{recoverer()} }},
		{"accessLog/json", func() []gin.HandlerFunc { return []gin.HandlerFunc{requestID(jsonLog), accessLog()} }},
		{"accessLog/discard", func() []gin.HandlerFunc { return []gin.HandlerFunc{requestID(discard), accessLog()} }},
		{"metrics", func() []gin.HandlerFunc {
			return []gin.HandlerFunc{newHTTPMetrics(prometheus.NewRegistry()).middleware()}
		}},
		{"authenticate", func() []gin.HandlerFunc { return []gin.HandlerFunc{authenticate(tokens)} }},
		{"limitBody+requireScopes", func() []gin.HandlerFunc {
			return []gin.HandlerFunc{authenticate(tokens), limitBody(1 << 20), requireScopes(nil, "GET /api/v1/users", []string{"svc.user.READ", "svc.user.ALL"})}
		}},
		{"all/json", func() []gin.HandlerFunc {
			return []gin.HandlerFunc{requestID(jsonLog), recoverer(), accessLog(), newHTTPMetrics(prometheus.NewRegistry()).middleware(),
				authenticate(tokens), limitBody(1 << 20), requireScopes(nil, "GET /api/v1/users", []string{"svc.user.READ", "svc.user.ALL"})}
		}},
		{"all/discard", func() []gin.HandlerFunc {
			return []gin.HandlerFunc{requestID(discard), recoverer(), accessLog(), newHTTPMetrics(prometheus.NewRegistry()).middleware(),
				authenticate(tokens), limitBody(1 << 20), requireScopes(nil, "GET /api/v1/users", []string{"svc.user.READ", "svc.user.ALL"})}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := gin.New()
			r.GET("/api/v1/users", append(bc.chain(), noop)...)
			req := httptest.NewRequest(http.MethodGet, "/api/v1/users?limit=100&cursor=eyJoIjoiYWJjIiwiayI6WzJdfQ", nil)
			req.Header.Set("Authorization", auth.Scheme+" token")
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				w.Body.Reset()
				r.ServeHTTP(w, req)
			}
		})
	}
}

// principalTokens accepts every token as one principal.
type principalTokens struct{ p *auth.Principal }

func (t principalTokens) ValidateAccessToken(_ context.Context, _ string) (*auth.Principal, error) {
	return t.p, nil
}
