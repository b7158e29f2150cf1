package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"

	"iam/api/auth"
	"iam/api/openapicheck"
	"iam/models"
)

// staticTokens accepts "good" with every job scope.
type staticTokens struct{}

func (staticTokens) ValidateAccessToken(_ context.Context, tok string) (*auth.Principal, error) {
	if tok == "good" {
		return &auth.Principal{UserID: 1, OrgID: 1, Scopes: []string{"svc.job.ALL"}}, nil
	}
	return nil, errors.New("unknown token")
}

type echoBody struct {
	Name  string `json:"name" validate:"required,max=5"`
	Count int    `json:"count" validate:"min=0"`
}

// newPlumbingServer is the real engine with two extra routes that exercise
// the body helpers and the panic guard.
func newPlumbingServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := New(Config{MaxBodyBytes: 1024}, Deps{Tokens: staticTokens{}, Log: slog.New(slog.DiscardHandler)})
	g := s.engine.Group("/api/v1/test", authenticate(s.deps.Tokens), limitBody(1024))
	g.POST("/echo", func(c *gin.Context) {
		var body echoBody
		if err := decodeJSON(c, &body); err != nil {
			abortWithError(c, err)
			return
		}
		c.JSON(http.StatusOK, body)
	})
	g.GET("/panic", func(c *gin.Context) { panic("boom: secret internals") })
	g.GET("/panic-outage", func(c *gin.Context) {
		panic(&models.Error{Code: models.EUNAVAILABLE, Detail: "no id can be made safely now"})
	})
	g.GET("/internal", func(c *gin.Context) { abortWithError(c, errors.New("pq: password authentication failed")) })
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// plumbingContract checks the answers of the plumbing tests against
// api/openapi.yaml, as api/apitest does for every other test (which this
// package's own tests cannot import).
var plumbingContract = sync.OnceValues(func() (*openapicheck.Checker, error) {
	doc, err := LoadOpenAPI()
	if err != nil {
		return nil, err
	}
	return openapicheck.New(doc)
})

// checkContract checks an answer of the plumbing server: fully on a
// documented route; on an unknown route or one of this file's test routes,
// an error answer must be the document's Error body.
func checkContract(t *testing.T, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	contract, err := plumbingContract()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	contract.CheckRouteOrError(t, req, resp, body, "Error")
}

// call sends a request with the token "good" and checks the answer against
// the OpenAPI document (checkContract).
func call(t *testing.T, srv *httptest.Server, method, path, contentType, body string, header map[string]string) (int, http.Header, ErrorDetail, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Service-oauthtoken good")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // only read: a close error tells the test nothing
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	checkContract(t, req, resp, raw)
	var eb ErrorBody
	_ = json.Unmarshal(raw, &eb)
	return resp.StatusCode, resp.Header, eb.Error, string(raw)
}

func TestPlumbing_ErrorsUseTheErrorBody(t *testing.T) {
	srv := newPlumbingServer(t)
	cases := []struct {
		name, method, path, ct, body string
		status                       int
		code, inDetail               string
	}{
		{"malformed JSON", "POST", "/api/v1/test/echo", "application/json", `{"name": "x",`, 400, CodeInvalidBody, "not complete JSON"},
		{"syntax error", "POST", "/api/v1/test/echo", "application/json", `{"name" "x"}`, 400, CodeInvalidBody, "malformed JSON"},
		{"empty body", "POST", "/api/v1/test/echo", "application/json", ``, 400, CodeInvalidBody, "empty"},
		{"two values", "POST", "/api/v1/test/echo", "application/json", `{"name":"a"} {}`, 400, CodeInvalidBody, "more than one"},
		{"wrong type", "POST", "/api/v1/test/echo", "application/json", `{"name": 5}`, 400, CodeInvalidField, "name: must be of type string"},
		{"unknown field", "POST", "/api/v1/test/echo", "application/json", `{"name":"a","nope":1}`, 400, CodeInvalidField, "nope"},
		{"rule broken", "POST", "/api/v1/test/echo", "application/json", `{"name":"toolong"}`, 400, CodeInvalidField, "name: must be at most 5 characters"},
		{"required", "POST", "/api/v1/test/echo", "application/json", `{"count": 1}`, 400, CodeInvalidField, "name: is required"},
		{"not JSON", "POST", "/api/v1/test/echo", "text/plain", `name=x`, 415, CodeMediaType, "application/json"},
		{"oversize declared", "POST", "/api/v1/test/echo", "application/json", `{"name":"` + strings.Repeat("a", 2000) + `"}`, 413, CodeTooLarge, "1024 bytes"},
		{"unknown route", "GET", "/api/v1/nowhere", "", "", 404, CodeRouteNotFound, "/api/v1/nowhere"},
		{"wrong method", "PUT", "/api/v1/jobs", "", "", 405, CodeRouteNotFound, "PUT"},
		{"panic", "GET", "/api/v1/test/panic", "", "", 500, CodeInternal, "retry later"},
		{"panic of an outage", "GET", "/api/v1/test/panic-outage", "", "", 503, CodeUnavailable, "no id"},
		{"internal error", "GET", "/api/v1/test/internal", "", "", 500, CodeInternal, "retry later"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, header, e, raw := call(t, srv, tc.method, tc.path, tc.ct, tc.body, nil)
			if status != tc.status || e.Code != tc.code || !strings.Contains(e.Detail, tc.inDetail) || e.Title == "" {
				t.Errorf("got %d %s, want %d code %s with %q in detail", status, raw, tc.status, tc.code, tc.inDetail)
			}
			if status == http.StatusServiceUnavailable && header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
			for _, leak := range []string{"goroutine", "secret internals", "pq:", ".go:"} {
				if strings.Contains(raw, leak) {
					t.Errorf("the body leaks %q: %s", leak, raw)
				}
			}
		})
	}
}

func TestPlumbing_ChunkedOversizeBodyIs413(t *testing.T) {
	srv := newPlumbingServer(t)
	pr, pw := io.Pipe()
	go func() {
		// The server may stop reading (413) before the end: the first
		// failed write ends the body.
		_, err := pw.Write([]byte(`{"name":"`))
		for i := 0; i < 100 && err == nil; i++ {
			_, err = pw.Write([]byte(strings.Repeat("a", 100)))
		}
		if err == nil {
			_, err = pw.Write([]byte(`"}`))
		}
		_ = pw.CloseWithError(err) // always nil: closing a pipe cannot fail
	}()
	req, _ := http.NewRequest("POST", srv.URL+"/api/v1/test/echo", pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Service-oauthtoken good")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // only read: a close error tells the test nothing
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	checkContract(t, req, resp, raw)
	var eb ErrorBody
	_ = json.Unmarshal(raw, &eb)
	if resp.StatusCode != 413 || eb.Error.Code != CodeTooLarge {
		t.Errorf("streamed oversize body: %d %+v", resp.StatusCode, eb)
	}
}

func TestPlumbing_ValidBodyPassesAndRequestIDRoundTrips(t *testing.T) {
	srv := newPlumbingServer(t)
	status, h, _, raw := call(t, srv, "POST", "/api/v1/test/echo", "application/json; charset=utf-8", `{"name":"ok","count":2}`,
		map[string]string{RequestIDHeader: "abc-123"})
	if status != 200 || raw != `{"name":"ok","count":2}` {
		t.Errorf("got %d %s", status, raw)
	}
	if h.Get(RequestIDHeader) != "abc-123" {
		t.Errorf("request id %q, want the caller's", h.Get(RequestIDHeader))
	}
	_, h, _, _ = call(t, srv, "GET", "/healthz", "", "", map[string]string{RequestIDHeader: "bad id with spaces"})
	if id := h.Get(RequestIDHeader); id == "" || strings.Contains(id, " ") {
		t.Errorf("an unusable incoming id must be replaced, got %q", id)
	}
}

func TestPlumbing_MetricsCountRequests(t *testing.T) {
	srv := newPlumbingServer(t)
	call(t, srv, "GET", "/healthz", "", "", nil)
	_, _, _, raw := call(t, srv, "GET", "/metrics", "", "", nil)
	if !strings.Contains(raw, `iam_http_requests_total{method="GET",route="/healthz",status="200"} 1`) {
		t.Errorf("metrics do not count the request:\n%s", raw)
	}
}

func TestOpenAPI_ServedAsJSONWithoutAToken(t *testing.T) {
	srv := newPlumbingServer(t)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/openapi.json", nil) // no token
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // only read: a close error tells the test nothing
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	checkContract(t, req, resp, raw)
	status := resp.StatusCode
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || status != 200 {
		t.Fatalf("GET openapi.json: %d %v", status, err)
	}
	if doc.OpenAPI == "" || doc.Paths["/api/v1/jobs"] == nil {
		t.Errorf("the served document lacks the jobs routes: %v", doc.OpenAPI)
	}
}

// Every route of the route table is in the OpenAPI document.
func TestOpenAPI_DocumentsEveryRoute(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, Deps{Log: slog.New(slog.DiscardHandler)})
	for _, rt := range s.Routes() {
		path := "/api/v1" + ginPathToOpenAPI(rt.Path)
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(rt.Method) == nil {
			t.Errorf("%s %s is not in api/openapi.yaml", rt.Method, path)
		}
	}
}

// ginPathToOpenAPI turns /jobs/:job_id into /jobs/{job_id}.
func ginPathToOpenAPI(p string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if strings.HasPrefix(part, ":") {
			parts[i] = "{" + part[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}
