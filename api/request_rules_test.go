package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api"
	"iam/api/apitest"
	"iam/api/auth"
	"iam/api/oauth"
	"iam/models/dbtest"
)

// rawDo sends a request without the contract check of env.Do: the answers
// here are to methods and paths the document does not list.
func rawDo(t *testing.T, method, url, token, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", auth.Scheme+" "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // only read: a close error tells the test nothing
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// TestRequestRules_PatchBodies: every PATCH route takes
// application/merge-patch+json as well as application/json (other
// methods do not), and a JSON null body is 400 on the PATCH routes that
// used to read it as {} (users, groups, device groups, logon script).
func TestRequestRules_PatchBodies(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.user.ALL", "svc.group.ALL", "svc.conditional_access_policy.ALL", "svc.quick_enrollment.ALL", "svc.device.ALL")
		user := createUser(t, env, tok, map[string]any{"firstName": "Ada", "email": "ada@example.com"})
		resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups", Token: tok, Body: map[string]any{"name": "G"}})
		var group struct{ Data struct{ ID string } }
		resp.JSON(t, &group)
		resp = env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/device-groups", Token: tok, Body: map[string]any{"name": "DG"}})
		var dg struct{ Data struct{ ID string } }
		resp.JSON(t, &dg)
		if group.Data.ID == "" || dg.Data.ID == "" {
			t.Fatalf("setup: group %q, device group %q", group.Data.ID, dg.Data.ID)
		}
		merge := http.Header{"Content-Type": {"application/merge-patch+json"}}
		for _, tc := range []struct{ path, patch string }{
			{"/api/v1/users/" + user.ID, `{"lastName":"Lovelace"}`},
			{"/api/v1/groups/" + group.Data.ID, `{"description":"merged"}`},
			{"/api/v1/protection/device-groups/" + dg.Data.ID, `{"description":"merged"}`},
			{"/api/v1/protection/quick-enrollment/logon-script-config", `{"window_title":"Merged"}`},
			{"/api/v1/device-account-linking", `{"is_enabled":true}`},
			{"/api/v1/protection/admin-settings", `{}`},
		} {
			if resp := env.Do(apitest.Request{Method: "PATCH", Path: tc.path, Token: tok, Header: merge, Body: tc.patch}); resp.Status != http.StatusOK {
				t.Errorf("PATCH %s as a merge patch: %d %s", tc.path, resp.Status, resp.Body)
			}
			wantError(t, env.Do(apitest.Request{Method: "PATCH", Path: tc.path, Token: tok, Header: merge, Body: "null"}), 400, "00000108", "null")
			wantError(t, env.Do(apitest.Request{Method: "PATCH", Path: tc.path, Token: tok,
				Header: http.Header{"Content-Type": {"application/json"}}, Body: " null "}), 400, "00000108", "null")
		}
		// The media type is the PATCH's only.
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/device-groups", Token: tok, Header: merge,
			Body: `{"name":"X"}`}), 415, "00000111", "application/json")
	})
}

// TestRequestRules_EmptyQueryValues: a query parameter without a value is
// 400 Invalid Parameter naming it on every list, not read as absent.
func TestRequestRules_EmptyQueryValues(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.user.ALL", "svc.job.ALL", "svc.device.ALL", "svc.group.ALL", "svc.conditional_access_policy.ALL",
			"svc.notification_template.ALL")
		for _, q := range []string{
			"/api/v1/users?limit=", "/api/v1/users?include=", "/api/v1/users?licensing=", "/api/v1/users?limit=5&from=",
			"/api/v1/jobs?from=", "/api/v1/groups?filter=%20", "/api/v1/devices?sort=", "/api/v1/templates/notification?fields",
			"/api/v1/protection/conditional-access-policies?cursor=", "/api/v1/protection/device-groups?limit=",
		} {
			param := q[strings.LastIndexAny(q, "?&")+1:]
			param, _, _ = strings.Cut(param, "=")
			wantError(t, env.Get(q, tok), 400, "00000107", `"`+param+`": is empty`)
		}
		if resp := env.Get("/api/v1/users?limit=5", tok); resp.Status != http.StatusOK {
			t.Errorf("a value: %d %s", resp.Status, resp.Body)
		}
	})
}

// TestRequestRules_FixedPathsAndMethods: GET, PATCH and DELETE on
// …/evaluate and …/priority are 405 with their true Allow, never a policy
// lookup; PUT …/evaluate advertises only POST; the OAuth endpoints answer
// 405 with Allow to other methods.
func TestRequestRules_FixedPathsAndMethods(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	tok := env.Token(env.Org, "svc.conditional_access_policy.ALL")
	for _, tc := range []struct{ method, path, allow string }{
		{"GET", policiesPath + "/evaluate", "POST"},
		{"PATCH", policiesPath + "/evaluate", "POST"},
		{"DELETE", policiesPath + "/evaluate", "POST"},
		{"PUT", policiesPath + "/evaluate", "POST"},
		{"GET", policiesPath + "/priority", "PUT"},
		{"PATCH", policiesPath + "/priority", "PUT"},
		{"DELETE", policiesPath + "/priority", "PUT"},
		{"PUT", "/api/v1/jobs", "GET"},
	} {
		resp, body := rawDo(t, tc.method, env.URL+tc.path, tok, "application/json", "{}") //nolint:bodyclose // rawDo read and closed the body
		var eb api.ErrorBody
		_ = json.Unmarshal(body, &eb)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow || eb.Error.Code != api.CodeRouteNotFound {
			t.Errorf("%s %s: %d Allow %q %s, want 405 Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), body, tc.allow)
		}
	}
	// A policy id still reaches its routes.
	wantError(t, env.Get(policiesPath+"/1", tok), 404, "00000103", "")

	auth, err := oauth.New(oauth.Config{Issuer: env.URL, Secret: []byte("methods test secret of at least thirty-two bytes")}, oauth.Deps{Store: env.Store})
	if err != nil {
		t.Fatal(err)
	}
	osrv := httptest.NewServer(auth.Handler())
	t.Cleanup(osrv.Close)
	for _, tc := range []struct{ method, path, allow string }{
		{"GET", "/oauth/v2/token", "POST"},
		{"DELETE", "/oauth/v2/token/revoke", "POST"},
		{"GET", "/oauth/v2/login", "POST"},
		{"PUT", "/oauth/v2/consent", "POST"},
		{"POST", "/oauth/v2/auth", "GET, HEAD"},
	} {
		resp, body := rawDo(t, tc.method, osrv.URL+tc.path, "", "", "") //nolint:bodyclose // rawDo read and closed the body
		var oe struct{ Error string }
		_ = json.Unmarshal(body, &oe)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow || oe.Error == "" {
			t.Errorf("%s %s: %d Allow %q %s, want 405 Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), body, tc.allow)
		}
	}
	//nolint:bodyclose // rawDo read and closed the body
	if resp, body := rawDo(t, "GET", osrv.URL+"/oauth/v2/nowhere", "", "", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown OAuth path: %d %s", resp.StatusCode, body)
	}
}

// TestRequestRules_IDsOfTheWrongShape: an id of 0, "0", a negative one
// or not a number says the id is invalid, not that it has the wrong
// JSON type.
func TestRequestRules_IDsOfTheWrongShape(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	tok := env.Token(env.Org, "svc.conditional_access_policy.ALL")
	for _, id := range []any{0, "0", -3, "-3", "x"} {
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: policiesPath, Token: tok,
			Body: map[string]any{"name": "P", "user_assignments": map[string]any{"user_ids": []any{id}}}}),
			400, "00000109", "user_assignments.user_ids: must be an id: a positive integer")
	}
}

// TestRequestRules_MalformedHeaderGetsTheErrorBody: a request net/http
// refuses before any handler (a control character in a header value, also
// on a kept-alive connection after a good request) is answered with the
// API's JSON error body through api.Listener, as iam serve and dev listen.
func TestRequestRules_MalformedHeaderGetsTheErrorBody(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: env.Server.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(api.Listener(ln)) }() // http.ErrServerClosed once the cleanup closes it
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})

	for _, tc := range []struct{ name, requests string }{
		{"control character", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\x01b\r\n\r\n"},
		{"after a good request", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\x7fb\r\n\r\n"},
		{"no Host", "GET /healthz HTTP/1.1\r\n\r\n"},
		{"bad header name", "GET /healthz HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if cerr := conn.Close(); cerr != nil {
					t.Error(cerr)
				}
			}()
			if err = conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err = io.WriteString(conn, tc.requests); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(conn)
			var resp *http.Response
			for range strings.Count(tc.requests, "HTTP/1.1\r\n") {
				if resp, err = http.ReadResponse(r, nil); err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close() // only read: a close error tells the test nothing
				if resp.StatusCode == http.StatusOK {
					continue
				}
				var eb api.ErrorBody
				if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
					json.Unmarshal(body, &eb) != nil || eb.Error.Code != api.CodeInvalidParameter || eb.Error.Detail == "" {
					t.Fatalf("%d %q %s, want 400 with the JSON error body", resp.StatusCode, resp.Header.Get("Content-Type"), body)
				}
				req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/malformed", nil)
				apitest.CheckErrorOfUnknownRoute(t, req, resp, body, "Error")
			}
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("last answer %d, want 400", resp.StatusCode)
			}
		})
	}
}
