package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgconn"

	"iam/api/auth"
	"iam/models"
)

// outageTokens answers as a token validator does when its store is down.
type outageTokens struct{}

func (outageTokens) ValidateAccessToken(_ context.Context, tok string) (*auth.Principal, error) {
	switch tok {
	case "unchecked": // the OAuth server's own answer
		return nil, fmt.Errorf("%w (%w)", &models.Error{Code: models.EUNAVAILABLE, Detail: "the token could not be checked"},
			errors.New("request_unauthorized"))
	case "dropped": // a store error as it comes
		return nil, fmt.Errorf("read access token: %w", &pgconn.PgError{Code: "57P01"})
	}
	return nil, errors.New("unknown token")
}

// A token that could not be checked is answered 503 with Retry-After, not
// 401; an unknown one still 401. A transient store error is 503, any other
// 500.
func TestUnavailable_503WithRetryAfterNot401Or500(t *testing.T) {
	s := New(Config{}, Deps{Tokens: outageTokens{}, Log: slog.New(slog.DiscardHandler)})
	g := s.engine.Group("/api/v1/test")
	g.GET("/down", func(c *gin.Context) {
		abortWithError(c, fmt.Errorf("select users: %w", &pgconn.PgError{Code: "08006"}))
	})
	g.GET("/busy", func(c *gin.Context) {
		abortWithError(c, &models.Error{Code: models.EUNAVAILABLE, Detail: "the workflow engine did not answer"})
	})
	g.GET("/broken", func(c *gin.Context) {
		abortWithError(c, fmt.Errorf("select users: %w", &pgconn.PgError{Code: "42P01"}))
	})
	authed := s.engine.Group("/api/v1/test/authed", authenticate(s.deps.Tokens))
	authed.GET("", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	for _, tc := range []struct {
		name, path, token string
		status            int
		code              string
	}{
		{"token not checked", "/api/v1/test/authed", "unchecked", 503, CodeUnavailable},
		{"token lookup dropped", "/api/v1/test/authed", "dropped", 503, CodeUnavailable},
		{"unknown token", "/api/v1/test/authed", "nope", 401, CodeUnauthorized},
		{"lost connection", "/api/v1/test/down", "", 503, CodeUnavailable},
		{"engine down", "/api/v1/test/busy", "", 503, CodeUnavailable},
		{"unexpected store error", "/api/v1/test/broken", "", 500, CodeInternal},
	} {
		req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
		req.Header.Set("Authorization", auth.Scheme+" "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close() // only read: a close error tells the test nothing
		wantRetry := ""
		if tc.status == 503 {
			wantRetry = fmt.Sprint(auth.RetryAfterSeconds)
		}
		if resp.StatusCode != tc.status || body.Error.Code != tc.code || resp.Header.Get("Retry-After") != wantRetry {
			t.Errorf("%s: %d %s Retry-After %q, want %d %s Retry-After %q", tc.name, resp.StatusCode, body.Error.Code,
				resp.Header.Get("Retry-After"), tc.status, tc.code, wantRetry)
		}
	}
}

// Every route documents its 503 with Retry-After, so that the contract
// checks accept it wherever an outage meets a request.
func TestOpenAPI_EveryRouteDocuments503WithRetryAfter(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, Deps{Log: slog.New(slog.DiscardHandler)})
	paths := []string{"/oauth/v2/auth GET", "/oauth/v2/login POST", "/oauth/v2/consent POST", "/oauth/v2/token POST", "/oauth/v2/token/revoke POST"}
	for _, rt := range s.Routes() {
		paths = append(paths, "/api/v1"+ginPathToOpenAPI(rt.Path)+" "+rt.Method)
	}
	for _, pm := range paths {
		var path, method string
		if _, err := fmt.Sscan(pm, &path, &method); err != nil {
			t.Fatal(err)
		}
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("%s %s is not in api/openapi.yaml", method, path)
			continue
		}
		r := item.GetOperation(method).Responses.Status(503)
		if r == nil || r.Value == nil || r.Value.Headers["Retry-After"] == nil {
			t.Errorf("%s %s documents no 503 with Retry-After", method, path)
		}
	}
}
