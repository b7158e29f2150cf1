package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/enrollment"
)

// badTexts are the strings the text rule refuses, as they appear inside a
// JSON string literal, with a word of the detail they get.
var badTexts = []struct{ name, literal, inDetail string }{
	{"NUL", `a\u0000b`, "NUL"},
	{"invalid UTF-8", "a\xff\xfeb", "UTF-8"},
	{"lone surrogate", `a\ud800b`, "surrogate"},
	{"lone low surrogate", `\udc00`, "surrogate"},
}

// withText marshals body, then puts literal in place of the string "@@".
func withText(t *testing.T, body any, literal string) []byte {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"@@"`)) {
		t.Fatalf("no @@ in %s", raw)
	}
	return bytes.ReplaceAll(raw, []byte(`"@@"`), []byte(`"`+literal+`"`))
}

// TestTextRule_EveryBodyRefusesNULAndInvalidUnicode: a NUL, bytes that
// are not UTF-8 or a lone surrogate in any string of a JSON body (agent
// registration and check-in, device groups, condition configs, policies,
// the linking settings PATCH) or of a multipart form (CA configs,
// uploads) is 400 naming the field, never a 500 or a stored string; the
// linking settings stay usable afterwards.
func TestTextRule_EveryBodyRefusesNULAndInvalidUnicode(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{AgentRate: 1000, AgentBurst: 1000})
		ctx := t.Context()
		tok := env.Token(env.Org, "svc.conditional_access_policy.ALL", "svc.conditional_factor_config.ALL", "svc.device.ALL",
			"svc.auth.ALL", "svc.quick_enrollment.ALL")
		key, err := env.Store.Devices.InstallKey(ctx, env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		npsKey, err := env.Store.Devices.InstallKey(ctx, env.Org.ID, devices.AgentNPS)
		if err != nil {
			t.Fatal(err)
		}
		dev := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		devAuth := http.Header{"Authorization": {"Device " + dev.id + ":" + dev.secret}}
		facts := func(field string) map[string]any {
			f := agentFacts("PC1", "S1")
			f[field] = "@@"
			return f
		}
		register := func(agentType string, key string) map[string]any {
			return map[string]any{"installation_key": key, "agent_type": agentType, "platform": "windows", "facts": facts("name")}
		}
		cases := []struct {
			name, method, path string
			body               any
			header             http.Header
			field              string
		}{
			{"register facts.name", "POST", "/agent/v1/register", register("DeviceAgent", key), nil, "facts.name"},
			{"NPS register facts.name", "POST", "/agent/v1/register", register("NPSExtension", npsKey), nil, "facts.name"},
			{"check-in user_name", "POST", "/agent/v1/checkin", map[string]any{"facts": dev.facts,
				"local_accounts": []map[string]any{{"user_name": "ok", "permission_level": "Standard"}, {"user_name": "@@", "permission_level": "Standard"}}},
				devAuth, "local_accounts[1].user_name"},
			{"check-in facts.description", "POST", "/agent/v1/checkin", map[string]any{"facts": facts("description")}, devAuth, "facts.description"},
			{"check-in offline display_name", "POST", "/agent/v1/checkin", map[string]any{"facts": dev.facts,
				"offline_enrolled_users": []map[string]any{{"id": "u1", "display_name": "@@", "user_name": "u1"}}}, devAuth, "offline_enrolled_users[0].display_name"},
			{"check-in ack message", "POST", "/agent/v1/checkin", map[string]any{"facts": dev.facts,
				"acks": []map[string]any{{"command_id": "1", "status": "failed", "message": "@@"}}}, devAuth, "acks[0].message"},
			{"device group name", "POST", "/api/v1/protection/device-groups", map[string]any{"name": "@@"}, nil, "name"},
			{"ipsources display_name", "POST", "/api/v1/protection/conditionalfactor-configs/ipsources",
				map[string]any{"display_name": "@@", "is_trusted_source": true, "ip_addresses": "192.0.2.0/24"}, nil, "display_name"},
			{"policy name", "POST", policiesPath, map[string]any{"name": "@@", "is_enabled": true}, nil, "name"},
			{"linking list", "PATCH", "/api/v1/device-account-linking", map[string]any{"link_restricted_local_accounts": []string{"root", "@@"}}, nil,
				"link_restricted_local_accounts[1]"},
			{"linking naming format", "PATCH", "/api/v1/device-account-linking",
				map[string]any{"attribute_type": "naming_format", "attribute_value": "@@"}, nil, "attribute_value"},
			{"a member name", "PATCH", "/api/v1/device-account-linking", map[string]any{"@@": true}, nil, "@@"},
		}
		for _, tc := range cases {
			for _, bad := range badTexts {
				t.Run(tc.name+"/"+bad.name, func(t *testing.T) {
					field := strings.ReplaceAll(tc.field, "@@", "")
					header := http.Header{"Content-Type": {"application/json"}}
					for k, v := range tc.header {
						header[k] = v
					}
					resp := env.Do(apitest.Request{Method: tc.method, Path: tc.path, Token: tok, Header: header,
						Body: withText(t, tc.body, bad.literal)})
					if resp.Status != http.StatusBadRequest {
						t.Fatalf("status %d, want 400: %s", resp.Status, resp.Body)
					}
					e := resp.ErrorBody(t)
					if e.Code != "00000109" || !strings.Contains(e.Detail, bad.inDetail) ||
						(field != "" && !strings.HasPrefix(e.Detail, field+": ")) {
						t.Errorf("error %+v, want 00000109 naming %s with %q", e, tc.field, bad.inDetail)
					}
				})
			}
		}

		// The linking settings were never written: the list still PATCHes.
		resp := env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/device-account-linking", Token: tok,
			Body: map[string]any{"is_enabled": true}})
		if resp.Status != http.StatusOK || strings.Contains(string(resp.Body), `\u0000`) {
			t.Fatalf("PATCH after the refusals: %d %s", resp.Status, resp.Body)
		}
		// A surrogate pair is text; the six characters \u0000 are not
		// (the database layer would write a NUL escape).
		resp = env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/device-account-linking", Token: tok,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   `{"link_restricted_local_accounts": ["smile\ud83d\ude00"]}`})
		if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), "smile\U0001F600") {
			t.Fatalf("a surrogate pair: %d %s", resp.Status, resp.Body)
		}
		wantError(t, env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/device-account-linking", Token: tok,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   `{"link_restricted_local_accounts": ["back\\u0000slash"]}`}), 400, "00000109", "link_restricted_local_accounts[0]: must not contain the text")

		// Multipart text fields: a CA config's mapping attribute, an
		// upload's field.
		smart := factorIDs(t, env, env.Org)[enrollment.FactorSmartCard]
		for _, bad := range []string{"a\x00b", "a\xffb"} {
			body, ct := caForm(t, map[string]string{"certificate_mapping_attribute": bad}, []byte("x"))
			wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/authnfactor-configs/" + smart + "/ca-configs", Token: tok,
				Body: body, Header: http.Header{"Content-Type": {ct}}}), 400, "00000109", "certificate_mapping_attribute: must")
			wantError(t, upload(t, env, "/api/v1/protection/quick-enrollment/upload-csv", tok,
				[][2]string{{"import_option", bad}}, "users.csv", []byte("email\n")), 400, "00000109", "import_option: must")
		}
	})
}
