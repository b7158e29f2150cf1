package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api"
	"iam/api/apitest"
	"iam/api/oauth"
	"iam/models"
	"iam/models/dbtest"
)

// hostileValues are JSON values no route may answer 500 to: NUL, lone
// surrogates, a 1 MB string (under the 1 MiB body limit), deep nesting and
// numbers no Go type holds.
var hostileValues = []struct{ name, json string }{
	{"NUL", `"a\u0000b"`},
	{"lone surrogate", `"\ud800x"`},
	{"escaped NUL text", `"a\\u0000b"`},
	{"1 MB string", `"` + strings.Repeat("a", 1_000_000) + `"`},
	{"deep arrays", strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000)},
	{"deep objects", strings.Repeat(`{"a":`, 20_000) + "1" + strings.Repeat("}", 20_000)},
	{"huge integer", "123456789012345678901234567890123456789"},
	{"huge exponent", "1e999999"},
	{"negative huge", "-1e400"},
	{"zero", "0"},
	{"negative", "-1"},
	{"zero string", `"0"`},
	{"null", "null"},
}

// jsonRoute is a route that takes a JSON body: its method, path (with
// parameters filled), the top-level members its body schema names, and
// how to authenticate.
type jsonRoute struct {
	method, path string
	fields       []string
	auth         string
}

// jsonRoutes walks the route table (Server.Routes) and the agent channel,
// and keeps those whose operation in api/openapi.yaml takes a JSON body, so
// that a new route is covered without touching this test.
func jsonRoutes(t *testing.T, srv *api.Server, params map[string]string, token, deviceAuth string) []jsonRoute {
	t.Helper()
	doc, err := api.LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	type rt struct{ method, path, auth string }
	var all []rt
	for _, r := range srv.Routes() {
		all = append(all, rt{r.Method, "/api/v1" + r.Path, api.AuthScheme + " " + token})
	}
	all = append(all, rt{"POST", "/agent/v1/register", ""}, rt{"POST", "/agent/v1/checkin", deviceAuth}, rt{"POST", "/agent/v1/authorize", deviceAuth})
	param := regexp.MustCompile(`:([a-z_]+)`)
	var out []jsonRoute
	for _, r := range all {
		docPath := param.ReplaceAllString(r.path, "{$1}")
		item := doc.Paths.Find(docPath)
		if item == nil {
			t.Fatalf("%s %s is not in the OpenAPI document", r.method, docPath)
		}
		op := item.GetOperation(r.method)
		if op == nil || op.RequestBody == nil || op.RequestBody.Value.Content.Get("application/json") == nil {
			continue
		}
		var fields []string
		if s := op.RequestBody.Value.Content.Get("application/json").Schema; s != nil && s.Value != nil {
			for name := range s.Value.Properties {
				fields = append(fields, name)
			}
			for _, one := range append(s.Value.OneOf, s.Value.AnyOf...) {
				for name := range one.Value.Properties {
					fields = append(fields, name)
				}
			}
		}
		sort.Strings(fields)
		path := param.ReplaceAllStringFunc(r.path, func(p string) string {
			v, ok := params[p[1:]]
			if !ok {
				t.Fatalf("no value for the path parameter %s of %s", p, r.path)
			}
			return v
		})
		out = append(out, jsonRoute{method: r.method, path: path, fields: slices.Compact(fields), auth: r.auth})
	}
	return out
}

// TestHostileBodies_NoRouteAnswers500: every route that takes a JSON body
// (walked from the route table), sent each hostile value as the whole body
// and in each top-level member its schema names, with a token holding every
// scope, answers below 500; so do the OAuth endpoints with the values as
// form fields and as a JSON body.
func TestHostileBodies_NoRouteAnswers500(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{AgentRate: 1e6, AgentBurst: 1e6})
		ctx := t.Context()
		var scopes []string
		for _, r := range env.Server.Routes() {
			scopes = append(scopes, r.Scopes...)
		}
		slices.Sort(scopes)
		tok := env.Token(env.Org, slices.Compact(scopes)...)

		key, err := env.Store.Devices.InstallKey(ctx, env.Org.ID, models.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		dev := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		user := &models.User{OrgID: env.Org.ID, Email: "ada@example.com", Status: models.UserActive}
		if err = env.Store.Users.Create(ctx, user, ""); err != nil {
			t.Fatal(err)
		}
		params := map[string]string{"account_id": "1", "agent_type": "DeviceAgent", "ca_config_id": "1", "config_id": "1",
			"device_group_id": "1", "device_id": dev.id, "execution_id": "1", "family": "ipsources", "group_id": "1", "job_id": "1",
			"policy_id": "1", "run_id": "1", "schedule_id": "1", "template_id": "1", "upload_id": "1", "user_id": models.FormatID(user.ID),
			"action_id": "delete-users", "authnfactor_config_id": factorIDs(t, env, env.Org)[models.FactorSmartCard]}
		routes := jsonRoutes(t, env.Server, params, tok, "Device "+dev.id+":"+dev.secret)
		if len(routes) < 20 {
			t.Fatalf("only %d routes take a JSON body", len(routes))
		}

		sent := 0
		send := func(r jsonRoute, contentType string, body []byte, what string) {
			t.Helper()
			req, _ := http.NewRequestWithContext(ctx, r.method, env.URL+r.path, bytes.NewReader(body))
			req.Header.Set("Content-Type", contentType)
			if r.auth != "" {
				req.Header.Set("Authorization", r.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s (%s): %v", r.method, r.path, what, err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			sent++
			if resp.StatusCode >= 500 {
				t.Errorf("%s %s with %s: %d %s", r.method, r.path, what, resp.StatusCode, out)
			}
		}
		for _, r := range routes {
			for _, v := range hostileValues {
				send(r, "application/json", []byte(v.json), v.name+" as the body")
				for _, f := range r.fields {
					send(r, "application/json", []byte(`{"`+f+`":`+v.json+`}`), v.name+" in "+f)
				}
			}
			if r.method == http.MethodPatch {
				send(r, "application/merge-patch+json", []byte(`{"a":"\u0000"}`), "a merge patch")
			}
		}
		t.Logf("%d requests to %d JSON routes", sent, len(routes))

		// The OAuth endpoints take forms; hostile values as fields, and JSON
		// bodies, are refused, never a 500.
		auth, err := oauth.New(oauth.Config{Issuer: env.URL, Secret: []byte("hostile test secret of at least thirty-two bytes")}, oauth.Deps{Store: env.Store})
		if err != nil {
			t.Fatal(err)
		}
		osrv := httptest.NewServer(auth.Handler())
		t.Cleanup(osrv.Close)
		for _, path := range []string{"/oauth/v2/token", "/oauth/v2/token/revoke", "/oauth/v2/login", "/oauth/v2/consent"} {
			for _, v := range hostileValues {
				if len(v.json) > 60_000 {
					continue // over the forms' 64 KiB bound: 413 by design
				}
				var s string
				if err := json.Unmarshal([]byte(v.json), &s); err != nil {
					s = v.json
				}
				form := url.Values{}
				for _, f := range []string{"grant_type", "client_id", "client_secret", "code", "refresh_token", "token", "request", "email", "password", "decision", "scope"} {
					form.Set(f, s)
				}
				req, _ := http.NewRequestWithContext(context.Background(), "POST", osrv.URL+path, strings.NewReader(form.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 500 {
					t.Errorf("POST %s with %s in every field: %d %s", path, v.name, resp.StatusCode, out)
				}
				req, _ = http.NewRequestWithContext(context.Background(), "POST", osrv.URL+path, strings.NewReader(v.json))
				req.Header.Set("Content-Type", "application/json")
				if resp, err = http.DefaultClient.Do(req); err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode >= 500 {
					t.Errorf("POST %s with %s as a JSON body: %d", path, v.name, resp.StatusCode)
				}
			}
		}
	})
}
