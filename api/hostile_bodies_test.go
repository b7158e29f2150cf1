package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/uptrace/bun"

	"iam/api"
	"iam/api/apitest"
	"iam/api/auth"
	"iam/api/oauth"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/devices"
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
// parameters filled), the top-level members its body schema names (with
// those that may hold a string in holdsString), and how to authenticate.
type jsonRoute struct {
	method, path string
	fields       []string
	holdsString  map[string]bool
	auth         string
}

// bodyFields adds to out the top-level members schema names, through
// allOf, oneOf and anyOf, each with whether it may hold a string.
func bodyFields(schema *openapi3.SchemaRef, out map[string]bool) {
	if schema == nil || schema.Value == nil {
		return
	}
	for name, p := range schema.Value.Properties {
		out[name] = out[name] || mayBeString(p)
	}
	for _, sub := range slices.Concat(schema.Value.AllOf, schema.Value.OneOf, schema.Value.AnyOf) {
		bodyFields(sub, out)
	}
}

// mayBeString reports whether a value of schema may be a string: its type
// says so, one of its alternatives does, or it says nothing of the type.
func mayBeString(schema *openapi3.SchemaRef) bool {
	if schema == nil || schema.Value == nil {
		return true
	}
	if v := schema.Value; v.Type != nil && !v.Type.IsEmpty() {
		return v.Type.Includes("string")
	}
	subs := slices.Concat(schema.Value.AllOf, schema.Value.OneOf, schema.Value.AnyOf)
	return len(subs) == 0 || slices.ContainsFunc(subs, mayBeString)
}

// jsonRoutes walks the route table (Server.Routes) and the agent channel,
// and keeps those whose operation in api/openapi.yaml takes a JSON body, so
// that a new route is covered without touching this test.
func jsonRoutes(t *testing.T, srv *api.Server, params routeParams, token, deviceAuth string) []jsonRoute {
	t.Helper()
	doc, err := api.LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	type rt struct{ method, path, auth string }
	var all []rt
	for _, r := range srv.Routes() {
		all = append(all, rt{r.Method, "/api/v1" + r.Path, auth.Scheme + " " + token})
	}
	all = append(all, rt{"POST", "/agent/v1/register", ""}, rt{"POST", "/agent/v1/checkin", deviceAuth}, rt{"POST", "/agent/v1/authorize", deviceAuth})
	var out []jsonRoute
	for _, r := range all {
		docPath := pathParam.ReplaceAllString(r.path, "{$1}")
		item := doc.Paths.Find(docPath)
		if item == nil {
			t.Fatalf("%s %s is not in the OpenAPI document", r.method, docPath)
		}
		op := item.GetOperation(r.method)
		if op == nil || op.RequestBody == nil || op.RequestBody.Value.Content.Get("application/json") == nil {
			continue
		}
		members := map[string]bool{}
		bodyFields(op.RequestBody.Value.Content.Get("application/json").Schema, members)
		fields := slices.Sorted(maps.Keys(members))
		for _, path := range params.fill(t, r.path) {
			out = append(out, jsonRoute{method: r.method, path: path, fields: fields, holdsString: members, auth: r.auth})
		}
	}
	return out
}

// hostileBodies returns a valid body of each route that creates or acts
// (keyed by method and filled path) in which the hostile values are sent
// one member at a time, so that they get past the checks of the other
// members; the agent channel's bodies are those of the device agent.
func hostileBodies(t *testing.T, env *apitest.Env, tok, installKey string, s *seeded, dev, agent *agentSim) map[string]map[string]any {
	t.Helper()
	aud, configs, params := s.aud, s.configs, s.params
	deviceGroup := params.common["device_group_id"]
	// Valid bodies; those of a PATCH are empty (a merge patch changing
	// nothing), the logon script's PUT sends back what GET shows. Names
	// hold {n}, the number of the request (numbered), so that each create
	// writes a resource rather than meet a conflict.
	var script struct{ Data map[string]any }
	env.Get("/api/v1/protection/quick-enrollment/logon-script-config", tok).JSON(t, &script)
	admin := models.FormatID(aud.admin.ID)
	bodies := map[string]map[string]any{
		"POST /api/v1/users":  {"firstName": "Hostile", "email": "hostile-{n}@example.com"},
		"POST /api/v1/groups": {"name": "Hostile {n}"},
		"POST /api/v1/groups/" + params.common["group_id"] + "/members":                         {"members": []string{models.FormatID(aud.users[0].ID)}},
		"PUT /api/v1/protection/quick-enrollment/logon-script-config":                           script.Data,
		"POST /api/v1/devices/" + dev.id + "/accounts/" + params.common["account_id"] + "/link": {"permission_level": "Standard", "idp_user_id": admin},
		"POST /api/v1/protection/conditionalfactor-configs/businesshours":                       {"display_name": "Hostile {n}", "business_hours_bitmap": officeHours(), "timezone": "UTC"},
		"POST /api/v1/protection/conditionalfactor-configs/geolocations":                        {"display_name": "Hostile {n}", "countries": []string{"DE"}},
		"POST /api/v1/protection/conditionalfactor-configs/ipsources":                           {"display_name": "Hostile {n}", "ip_addresses": "198.51.100.0/24"},
		"POST /api/v1/protection/conditional-access-policies": {"name": "Hostile {n}", "access_type": "allow",
			"access_conditions": map[string]any{"criteria_expression": "1", "conditions": []map[string]any{
				{"sequence_number": 1, "factor_type": "ipaddress", "comparator": "in", "factor_configs": []string{configs["ipsources"]}}}},
			"endpoints_settings": []map[string]any{{"endpoint": "IIS"}}},
		"POST /api/v1/protection/device-groups":                             {"name": "Hostile {n}"},
		"POST /api/v1/protection/device-groups/" + deviceGroup + "/members": {"device_ids": []string{dev.id}},
		"POST /api/v1/protection/conditional-access-policies/evaluate":      {"user_id": admin, "device_id": dev.id, "endpoint": "ComputerDevices", "action": "RDP", "ip": "198.51.100.7"},
		"POST /api/v1/management/actions/delete-users/execute":              {"user_ids": []string{models.FormatID(aud.users[1].ID)}},
		"POST /api/v1/management/actions/move-users/execute":                {"user_ids": []string{models.FormatID(aud.users[2].ID)}, "target_container": "OU=Staff,DC=example,DC=com"},
		"POST /api/v1/templates/notification":                               newTemplateBody("Hostile {n}"),
		"POST " + schedulesPath:                                             aud.body("Hostile {n}"),
		"POST /agent/v1/register":                                           {"installation_key": installKey, "agent_type": "DeviceAgent", "platform": "windows", "facts": agentFacts("PC2", "S2")},
		"POST /agent/v1/checkin":                                            {"facts": agent.facts, "local_accounts": localAccounts("bob")},
		"POST /agent/v1/authorize":                                          {"user_id": admin, "action": "RDP", "ip": "198.51.100.7"},
	}
	return bodies
}

// numbered returns body with {n} in its string members replaced by n.
func numbered(body map[string]any, n int) map[string]any {
	out := maps.Clone(body)
	for k, v := range out {
		if s, ok := v.(string); ok {
			out[k] = strings.ReplaceAll(s, "{n}", strconv.Itoa(n))
		}
	}
	return out
}

// withMember returns body with its member name set to the JSON text value.
func withMember(body map[string]any, name, value string) []byte {
	rest := maps.Clone(body)
	delete(rest, name)
	out := []byte(`{"` + name + `":` + value)
	if len(rest) > 0 {
		others, _ := json.Marshal(rest)
		out = append(append(out, ','), others[1:len(others)-1]...)
	}
	return append(out, '}')
}

// sendBody sends body to the route and returns the answer.
func sendBody(t *testing.T, env *apitest.Env, r jsonRoute, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), r.method, env.URL+r.path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if r.auth != "" {
		req.Header.Set("Authorization", r.auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer func() { _ = resp.Body.Close() }() // only read: a close error tells the test nothing
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// checkPathsResolve requires that the seeded resources are there and that
// the path of every route finds its resource: each GET route with path
// parameters answers 200, and each JSON route answers an empty object with
// anything but 404 (a 400 for the missing members, or a success), so that
// the hostile bodies sent to it reach the handling of the body.
func checkPathsResolve(t *testing.T, env *apitest.Env, tok string, params routeParams, routes []jsonRoute, when string) {
	t.Helper()
	query := map[string]string{"/protection/agents-info/:agent_type/download": "?platform=windows"} // a required parameter
	for _, r := range env.Server.Routes() {
		if r.Method != http.MethodGet || !strings.Contains(r.Path, ":") {
			continue
		}
		if strings.HasSuffix(r.Path, "/events") {
			// A stream that lasts while its (seeded, QUEUED) job does: the
			// answer's head tells whether the path resolved.
			for _, path := range params.fill(t, "/api/v1"+r.Path) {
				if status := streamStatus(t, env, path, tok); status != http.StatusOK {
					t.Errorf("%s: GET %s answered %d, want 200", when, path, status)
				}
			}
			continue
		}
		for _, path := range params.fill(t, "/api/v1"+r.Path+query[r.Path]) {
			if resp := env.Get(path, tok); resp.Status != http.StatusOK {
				t.Errorf("%s: GET %s answered %d %s, want 200", when, path, resp.Status, resp.Body)
			}
		}
	}
	for _, r := range routes {
		if status, out := sendBody(t, env, r, "application/json", []byte("{}")); status == http.StatusNotFound {
			t.Errorf("%s: %s %s answered {} with 404 %s: its path does not resolve", when, r.method, r.path, out)
		}
	}
}

// streamStatus opens a stream (text/event-stream) and returns its status
// once its head arrived, then hangs up.
func streamStatus(t *testing.T, env *apitest.Env, path, tok string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+path, nil)
	req.Header.Set("Authorization", auth.Scheme+" "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	_ = resp.Body.Close() // a stream: only its head was wanted
	return resp.StatusCode
}

// TestHostileBodies_NoRouteAnswers500: every route that takes a JSON body
// (walked from the route table), its path naming real resources, sent each
// hostile value as the whole body and in each top-level member its schema
// names (within a valid body of the route where it has one; the 1 MB
// string only in members that may hold a string), with a token holding
// every scope, answers below 500; so do the OAuth endpoints with the
// values as form fields and as a JSON body. Before and after, each route's
// path is checked to resolve and each valid body to be accepted, so the
// values reached the handling of the body, past the checks of the other
// members.
func TestHostileBodies_NoRouteAnswers500(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{AgentRate: 1e6, AgentBurst: 1e6, Temporal: true})
		ctx := t.Context()
		var scopes []string
		for _, r := range env.Server.Routes() {
			scopes = append(scopes, r.Scopes...)
		}
		slices.Sort(scopes)
		tok := env.Token(env.Org, slices.Compact(scopes)...)

		key, err := env.Store.Devices.InstallKey(ctx, env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		// The agent channel talks as a device of its own: a check-in
		// reports the whole list of the device's local accounts, and
		// leaves the accounts of the first, which the link routes name.
		dev := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		agent := registerAgent(t, env, key, agentFacts("Agent", "S9"))
		seed := seedResources(t, env, tok, dev)
		params, bodies := seed.params, hostileBodies(t, env, tok, key, seed, dev, agent)
		routes := jsonRoutes(t, env.Server, params, tok, "Device "+agent.id+":"+agent.secret)
		if len(routes) < 20 {
			t.Fatalf("only %d routes take a JSON body", len(routes))
		}
		checkPathsResolve(t, env, tok, params, routes, "before")
		used := map[string]bool{}
		for _, r := range routes {
			key := r.method + " " + r.path
			if body, ok := bodies[key]; ok {
				used[key] = true
				valid, _ := json.Marshal(numbered(body, 0))
				if status, out := sendBody(t, env, r, "application/json", valid); status >= 300 {
					t.Errorf("%s with its valid body: %d %s", key, status, out)
				}
			}
		}
		for key := range bodies {
			if !used[key] {
				t.Errorf("a valid body for %s, which is not a JSON route", key)
			}
		}

		sent := 0
		send := func(r jsonRoute, body []byte, what string) {
			t.Helper()
			status, out := sendBody(t, env, r, "application/json", body)
			sent++
			if status >= 500 {
				t.Errorf("%s %s with %s: %d %s", r.method, r.path, what, status, out)
			}
		}
		for _, r := range routes {
			valid := bodies[r.method+" "+r.path]
			for _, v := range hostileValues {
				send(r, []byte(v.json), v.name+" as the body")
				for _, f := range r.fields {
					if v.name == "1 MB string" && !r.holdsString[f] {
						continue // refused for its type like any string
					}
					send(r, withMember(numbered(valid, sent+1), f, v.json), v.name+" in "+f)
				}
			}
			if r.method == http.MethodPatch {
				if status, out := sendBody(t, env, r, "application/merge-patch+json", []byte(`{"a":"\u0000"}`)); status >= 500 {
					t.Errorf("%s %s with a merge patch: %d %s", r.method, r.path, status, out)
				}
			}
		}
		t.Logf("%d requests to %d JSON routes", sent, len(routes))
		checkPathsResolve(t, env, tok, params, routes, "after")

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
				_ = resp.Body.Close() // only read: a close error tells the test nothing
				if resp.StatusCode >= 500 {
					t.Errorf("POST %s with %s in every field: %d %s", path, v.name, resp.StatusCode, out)
				}
				req, _ = http.NewRequestWithContext(context.Background(), "POST", osrv.URL+path, strings.NewReader(v.json))
				req.Header.Set("Content-Type", "application/json")
				if resp, err = http.DefaultClient.Do(req); err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close() // only read: a close error tells the test nothing
				if resp.StatusCode >= 500 {
					t.Errorf("POST %s with %s as a JSON body: %d", path, v.name, resp.StatusCode)
				}
			}
		}
	})
}
