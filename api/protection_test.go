package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/protection"
)

const (
	configsPath  = "/api/v1/protection/conditionalfactor-configs"
	policiesPath = "/api/v1/protection/conditional-access-policies"
)

// officeHours is Monday to Friday 09:00–17:00 as a week bitmap.
func officeHours() string {
	b := []byte(strings.Repeat("0", 168))
	for d := 1; d <= 5; d++ {
		for h := 9; h < 17; h++ {
			b[d*24+h] = '1'
		}
	}
	return string(b)
}

func wantCauses(t *testing.T, resp *apitest.Response, want map[string]string) {
	t.Helper()
	if resp.Status != http.StatusBadRequest {
		t.Fatalf("status %d %s, want 400", resp.Status, resp.Body)
	}
	e := resp.ErrorBody(t)
	got := map[string]string{}
	for _, c := range e.Causes {
		if _, dup := got[c.Title]; dup {
			t.Errorf("two causes for %s", c.Title)
		}
		got[c.Title] = c.Detail
	}
	if len(got) != len(want) {
		t.Errorf("causes %v, want %v", got, want)
	}
	for f, part := range want {
		if !strings.Contains(got[f], part) {
			t.Errorf("cause %s = %q, want %q in it", f, got[f], part)
		}
	}
}

func TestConditionConfigs_API(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.conditional_factor_config.all")
		create := func(family string, body map[string]any) map[string]any {
			t.Helper()
			resp := env.Do(apitest.Request{Method: "POST", Path: configsPath + "/" + family, Token: tok, Body: body})
			if resp.Status != http.StatusCreated {
				t.Fatalf("POST %s: %d %s", family, resp.Status, resp.Body)
			}
			var out map[string]any
			resp.JSON(t, &out)
			if _, wrapped := out["data"]; wrapped {
				t.Fatalf("create answered with a data wrapper: %s", resp.Body)
			}
			return out
		}
		hours := create("businesshours", map[string]any{"display_name": "Office", "business_hours_bitmap": officeHours(), "timezone": "Europe/Paris"})
		geo := create("geolocations", map[string]any{"display_name": "EU", "countries": []string{"fr", "DE"}, "is_unknown_ip_locations_included": false})
		ips := create("ipsources", map[string]any{"display_name": "HQ", "is_trusted_source": true, "ip_addresses": "192.0.2.0/24, 2001:db8::1",
			"ip_address_ranges": []map[string]string{{"from": "198.51.100.1", "to": "198.51.100.9"}}})
		if geo["countries"].([]any)[0] != "FR" || ips["ip_addresses"] != "192.0.2.0/24,2001:db8::1" || hours["ca_policies_usage_count"].(float64) != 0 {
			t.Errorf("created %v %v %v", hours, geo, ips)
		}
		// The spec's 16-character bitmap, a bad zone, countries and
		// addresses: one cause per broken field.
		wantCauses(t, env.Do(apitest.Request{Method: "POST", Path: configsPath + "/businesshours", Token: tok,
			Body: map[string]any{"display_name": "Short", "business_hours_bitmap": "1111000011110000", "timezone": "Nowhere/City"}}),
			map[string]string{"business_hours_bitmap": "must be 168 characters", "timezone": "not an IANA time zone"})
		wantCauses(t, env.Do(apitest.Request{Method: "POST", Path: configsPath + "/geolocations", Token: tok,
			Body: map[string]any{"display_name": "Bad", "countries": []string{"ZZ", "FR"}}}),
			map[string]string{"countries": `"ZZ" is not`})
		wantCauses(t, env.Do(apitest.Request{Method: "POST", Path: configsPath + "/ipsources", Token: tok,
			Body: map[string]any{"display_name": "Bad", "ip_addresses": "10.0.0.1,10.0.0.300", "ip_address_ranges": []map[string]string{{"from": "::2", "to": "::1"}}}}),
			map[string]string{"ip_addresses": `"10.0.0.300"`, "ip_address_ranges": "from ::2 is after to ::1"})
		// A field of another family is not known.
		if resp := env.Do(apitest.Request{Method: "POST", Path: configsPath + "/geolocations", Token: tok,
			Body: map[string]any{"display_name": "Mixed", "timezone": "UTC"}}); resp.Status != http.StatusBadRequest {
			t.Errorf("field of another family: %d %s", resp.Status, resp.Body)
		}
		if resp := env.Get(configsPath+"/weather", tok); resp.Status != http.StatusNotFound {
			t.Errorf("unknown family: %d", resp.Status)
		}

		// Get in every family, and not across families.
		for family, c := range map[string]map[string]any{"businesshours": hours, "geolocations": geo, "ipsources": ips} {
			resp := env.Get(configsPath+"/"+family+"/"+c["id"].(string), tok)
			if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), c["display_name"].(string)) {
				t.Errorf("GET %s: %d %s", family, resp.Status, resp.Body)
			}
		}
		if resp := env.Get(configsPath+"/geolocations/"+hours["id"].(string), tok); resp.Status != http.StatusNotFound ||
			resp.ErrorBody(t).Title != "Conditional Factor Config Not Found" {
			t.Errorf("GET across families: %d %s", resp.Status, resp.Body)
		}

		// PATCH merges over the writable fields.
		resp := env.Do(apitest.Request{Method: "PATCH", Path: configsPath + "/ipsources/" + ips["id"].(string), Token: tok,
			Body: map[string]any{"is_trusted_source": false}})
		if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"is_trusted_source":false`) || !strings.Contains(string(resp.Body), `"ip_addresses":"192.0.2.0/24,2001:db8::1"`) {
			t.Errorf("PATCH: %d %s", resp.Status, resp.Body)
		}
		if resp = env.Do(apitest.Request{Method: "PATCH", Path: configsPath + "/ipsources/" + ips["id"].(string), Token: tok,
			Body: map[string]any{"ca_policies_usage_count": 5}}); resp.Status != http.StatusBadRequest {
			t.Errorf("PATCH of a read-only field: %d %s", resp.Status, resp.Body)
		}

		// Lists: offset meta, fields, filter, from, limit.
		for i := range 3 {
			create("ipsources", map[string]any{"display_name": fmt.Sprintf("Branch %d", i), "ip_addresses": fmt.Sprintf("10.%d.0.0/16", i)})
		}
		resp = env.Get(configsPath+"/ipsources?fields=display_name&filter="+urlQuery(`display_name sw "Branch"`)+"&from=1&limit=1", tok)
		if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"data":[{"id":`) || !strings.Contains(string(resp.Body), `"display_name":"Branch 1"}]`) ||
			!strings.Contains(string(resp.Body), `"meta":{"start_index":1,"limit":1,"total_no_of_objects":3}`) {
			t.Errorf("list: %d %s", resp.Status, resp.Body)
		}

		// A policy using the geolocation config: the count shows it and the
		// bulk delete answers 409 for it, 204 and 404 for the others.
		ptok := env.Token(env.Org, "svc.conditional_access_policy.all")
		policy := map[string]any{"name": "EU only", "access_type": "deny",
			"access_conditions": map[string]any{"criteria_expression": "1", "conditions": []map[string]any{
				{"sequence_number": 1, "factor_type": "geolocation", "comparator": "not_in", "factor_configs": []string{geo["id"].(string)}}}},
			"endpoints_settings": []map[string]any{{"endpoint": "IIS"}}}
		if resp = env.Do(apitest.Request{Method: "POST", Path: policiesPath, Token: ptok, Body: policy}); resp.Status != http.StatusCreated {
			t.Fatalf("POST policy: %d %s", resp.Status, resp.Body)
		}
		if resp = env.Get(configsPath+"/geolocations/"+geo["id"].(string), tok); !strings.Contains(string(resp.Body), `"ca_policies_usage_count":1`) {
			t.Errorf("usage count: %s", resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "DELETE", Path: configsPath + "/geolocations?ids=" + geo["id"].(string) + ",123,x", Token: tok})
		var items []struct {
			ResourceID string `json:"resource_id"`
			Status     int
			Error      *struct{ Title, Detail string }
		}
		resp.JSON(t, &items)
		if resp.Status != http.StatusOK || len(items) != 3 || items[0].Status != 409 || !strings.Contains(items[0].Error.Detail, `"EU only"`) ||
			items[1].Status != 404 || items[1].Error.Title != "Conditional Factor Config Not Found" || items[2].Status != 404 {
			t.Errorf("bulk delete: %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "DELETE", Path: configsPath + "/businesshours?ids=" + hours["id"].(string), Token: tok})
		if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"status":204`) {
			t.Errorf("bulk delete unused: %d %s", resp.Status, resp.Body)
		}

		// Another organization sees nothing of it.
		otherTok := env.Token(env.NewOrg("Other"), "svc.conditional_factor_config.all")
		if resp := env.Get(configsPath+"/ipsources/"+ips["id"].(string), otherTok); resp.Status != http.StatusNotFound {
			t.Errorf("other org GET: %d", resp.Status)
		}
		if resp := env.Get(configsPath+"/ipsources", otherTok); !strings.Contains(string(resp.Body), `"total_no_of_objects":0`) {
			t.Errorf("other org list: %s", resp.Body)
		}
	})
}

func urlQuery(s string) string {
	return strings.NewReplacer(" ", "%20", `"`, "%22").Replace(s)
}

func TestPolicies_API(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.conditional_access_policy.all")
		ips := &protection.ConditionConfig{OrgID: env.Org.ID, Family: protection.FamilyIPSources, DisplayName: "HQ", IPAddresses: "192.0.2.0/24", IsTrustedSource: true}
		hours := &protection.ConditionConfig{OrgID: env.Org.ID, Family: protection.FamilyBusinessHours, DisplayName: "Office", BusinessHoursBitmap: officeHours(), Timezone: "UTC"}
		for _, c := range []*protection.ConditionConfig{ips, hours} {
			if err := env.Store.ConditionConfigs.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		user := &identity.User{OrgID: env.Org.ID, Email: "ann@example.com", DisplayName: "Ann", Status: identity.UserActive}
		if err := env.Store.Users.Create(ctx, user, ""); err != nil {
			t.Fatal(err)
		}
		group := &identity.Group{OrgID: env.Org.ID, Name: "Sales"}
		if err := env.Store.Groups.Create(ctx, group, nil, nil); err != nil {
			t.Fatal(err)
		}
		factors, err := env.Store.Factors.List(ctx, env.Org.ID)
		if err != nil {
			t.Fatal(err)
		}
		body := map[string]any{
			"name": "Remote staff", "description": "outside the office", "access_type": "allow",
			"user_assignments": map[string]any{"user_ids": []string{models.FormatID(user.ID)}, "group_ids": []int64{group.ID}},
			"access_conditions": map[string]any{"criteria_expression": "1 OR (2)", "conditions": []map[string]any{
				{"sequence_number": 1, "factor_type": "ipaddress", "comparator": "not_in", "factor_configs": []string{}, "include_all_trusted_sources": true},
				{"sequence_number": 2, "factor_type": "time", "comparator": "not_in", "factor_configs": []string{models.FormatID(hours.ID)}},
			}},
			"endpoints_settings": []map[string]any{
				{"endpoint": "ComputerDevices", "actions": []string{"RDP", "SSH"}, "device_assignment": map[string]any{"all_devices_group_selected": true},
					"secondary_authentication": map[string]any{"is_mfa_enabled": true, "no_of_required_factors": 1,
						"factor_configs": []map[string]any{{"authn_factor_config_id": factors[2].ID, "verification_order": 1, "is_mandatory": true}}}},
				{"endpoint": "IdentityServer", "type": "SensitiveActions", "actions": []string{"delete_users"}},
			},
			"advanced_settings": map[string]any{"is_captcha_enabled": true, "captcha_frequency_type": "after_failed_attempts", "captcha_failed_attempts_threshold": 3},
		}
		resp := env.Do(apitest.Request{Method: "POST", Path: policiesPath, Token: tok, Body: body})
		if resp.Status != http.StatusCreated {
			t.Fatalf("POST: %d %s", resp.Status, resp.Body)
		}
		var created struct {
			Data struct {
				ID               string
				Priority         int
				IsAgentRequired  bool `json:"is_agent_required"`
				Endpoints        []string
				UserAssignments  struct{ UsersCount, GroupsCount int } `json:"user_assignments"`
				AccessConditions struct {
					CriteriaExpression string `json:"criteria_expression"`
				} `json:"access_conditions"`
			}
		}
		resp.JSON(t, &created)
		p := created.Data
		if p.Priority != 1 || !p.IsAgentRequired || strings.Join(p.Endpoints, ",") != "ComputerDevices,IdentityServer" ||
			p.AccessConditions.CriteriaExpression != "1 or 2" || !strings.Contains(string(resp.Body), `"users_count":1,"groups_count":1`) {
			t.Errorf("created %s", resp.Body)
		}
		// Validation: every broken field one cause.
		bad := map[string]any{"name": "Bad", "access_type": "maybe",
			"access_conditions": map[string]any{"criteria_expression": "1 and 3", "conditions": []map[string]any{
				{"sequence_number": 1, "factor_type": "geolocation", "comparator": "in", "factor_configs": []string{models.FormatID(ips.ID)}}}},
			"user_assignments":   map[string]any{"user_ids": []string{"42"}},
			"endpoints_settings": []map[string]any{{"endpoint": "NPS", "type": "IIS"}, {"endpoint": "IdentityServer", "type": "SensitiveActions"}}}
		wantCauses(t, env.Do(apitest.Request{Method: "POST", Path: policiesPath, Token: tok, Body: bad}), map[string]string{
			"access_type":                                    "allow or deny",
			"access_conditions.criteria_expression":          "sequence number(s) 3",
			"access_conditions.conditions[0].factor_configs": "is a ipsources config; this condition takes geolocations configs",
			"user_assignments.user_ids":                      "no user with id 42",
			"endpoints_settings[0].type":                     "must be NPS_VPN for NPS",
			"endpoints_settings[1].actions":                  "name at least one of delete_users",
		})

		// The list: the default policy last, list-item shape; the
		// notification_template scopes the spec lists are accepted too.
		for _, scope := range []string{"svc.conditional_access_policy.read", "svc.notification_template.read"} {
			resp = env.Get(policiesPath, env.Token(env.Org, scope))
			if resp.Status != http.StatusOK {
				t.Fatalf("list with %s: %d %s", scope, resp.Status, resp.Body)
			}
		}
		var list struct {
			Data []struct {
				ID              string
				DisplayName     string   `json:"display_name"`
				Priority        int      `json:"priority"`
				IsDefaultPolicy bool     `json:"is_default_policy"`
				Endpoints       []string `json:"endpoints"`
			}
			Meta struct {
				Total int `json:"total_no_of_objects"`
			}
		}
		resp.JSON(t, &list)
		if len(list.Data) != 2 || list.Data[0].ID != p.ID || !list.Data[1].IsDefaultPolicy || list.Data[1].Priority != 2 ||
			list.Data[1].Endpoints[0] != "All Endpoints" || list.Meta.Total != 2 {
			t.Fatalf("list %s", resp.Body)
		}
		defaultID := list.Data[1].ID
		resp = env.Get(policiesPath+"?fields=priority&filter="+urlQuery("is_default_policy eq true"), tok)
		if !strings.Contains(string(resp.Body), `"data":[{"id":"`+defaultID+`","priority":2}]`) {
			t.Errorf("fields and filter: %s", resp.Body)
		}

		// A second policy; reorder; delete the default is refused.
		second := map[string]any{"name": "Kiosks", "access_type": "deny", "endpoints_settings": []map[string]any{{"endpoint": "SSOApplications"}}}
		resp = env.Do(apitest.Request{Method: "POST", Path: policiesPath, Token: tok, Body: second})
		if resp.Status != http.StatusCreated {
			t.Fatalf("POST second: %d %s", resp.Status, resp.Body)
		}
		var sec struct{ Data struct{ ID string } }
		resp.JSON(t, &sec)
		for _, ids := range [][]string{{sec.Data.ID}, {sec.Data.ID, p.ID, defaultID}, {sec.Data.ID, sec.Data.ID}} {
			if resp = env.Do(apitest.Request{Method: "PUT", Path: policiesPath + "/priority", Token: tok, Body: map[string]any{"ids": ids}}); resp.Status != http.StatusBadRequest {
				t.Errorf("reorder %v: %d %s", ids, resp.Status, resp.Body)
			}
		}
		resp = env.Do(apitest.Request{Method: "PUT", Path: policiesPath + "/priority", Token: tok, Body: map[string]any{"ids": []string{sec.Data.ID, p.ID}}})
		if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"id":"`+sec.Data.ID+`","display_name":"Kiosks","description":"","is_enabled":true,"is_default_policy":false,"priority":1`) {
			t.Errorf("reorder: %d %s", resp.Status, resp.Body)
		}
		if resp = env.Do(apitest.Request{Method: "DELETE", Path: policiesPath + "/" + defaultID, Token: tok}); resp.Status != http.StatusConflict {
			t.Errorf("delete default: %d %s", resp.Status, resp.Body)
		}

		// PATCH merges; read-only members refused.
		resp = env.Do(apitest.Request{Method: "PATCH", Path: policiesPath + "/" + p.ID, Token: tok, Body: map[string]any{"is_enabled": false, "description": "changed"}})
		if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"is_enabled":false`) || !strings.Contains(string(resp.Body), `"criteria_expression":"1 or 2"`) {
			t.Errorf("PATCH: %d %s", resp.Status, resp.Body)
		}
		if resp = env.Do(apitest.Request{Method: "PATCH", Path: policiesPath + "/" + p.ID, Token: tok, Body: map[string]any{"priority": 9}}); resp.Status != http.StatusBadRequest {
			t.Errorf("PATCH priority: %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "PATCH", Path: policiesPath + "/" + p.ID, Token: tok,
			Body: map[string]any{"access_conditions": map[string]any{"criteria_expression": "1"}}})
		wantCauses(t, resp, map[string]string{"access_conditions.criteria_expression": "does not use the condition(s) with sequence number(s) 2"})

		// Sub-lists.
		resp = env.Get(policiesPath+"/"+p.ID+"/user-assignment-users", tok)
		if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"name":"Ann","email":"ann@example.com"`) || !strings.Contains(string(resp.Body), `"total_no_of_objects":1`) {
			t.Errorf("users: %d %s", resp.Status, resp.Body)
		}
		resp = env.Get(policiesPath+"/"+p.ID+"/user-assignment-groups", tok)
		if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"name":"Sales","type":"static"`) {
			t.Errorf("groups: %d %s", resp.Status, resp.Body)
		}
		resp = env.Get(policiesPath+"/"+p.ID+"/protected-devices", tok)
		if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"total_no_of_objects":0`) {
			t.Errorf("devices: %d %s", resp.Status, resp.Body)
		}
		for _, sub := range []string{"user-assignment-users", "user-assignment-groups", "protected-devices"} {
			resp := env.Get(policiesPath+"/1234/"+sub, tok)
			if resp.Status != http.StatusNotFound || resp.ErrorBody(t).Title != "Policy Not Found" {
				t.Errorf("%s of a missing policy: %d %s", sub, resp.Status, resp.Body)
			}
		}

		// Tenant isolation.
		otherTok := env.Token(env.NewOrg("Other"), "svc.conditional_access_policy.all")
		for _, path := range []string{policiesPath + "/" + p.ID, policiesPath + "/" + p.ID + "/user-assignment-users"} {
			if resp := env.Get(path, otherTok); resp.Status != http.StatusNotFound {
				t.Errorf("other org %s: %d", path, resp.Status)
			}
		}
		// A condition naming another organization's config is refused.
		body["name"] = "Theirs"
		if resp := env.Do(apitest.Request{Method: "POST", Path: policiesPath, Token: otherTok, Body: body}); resp.Status != http.StatusBadRequest ||
			!strings.Contains(string(resp.Body), "no conditional factor config with id") {
			t.Errorf("other org's config: %d %s", resp.Status, resp.Body)
		}
		// Delete; the other moves up.
		if resp := env.Do(apitest.Request{Method: "DELETE", Path: policiesPath + "/" + sec.Data.ID, Token: tok}); resp.Status != http.StatusNoContent {
			t.Errorf("delete: %d %s", resp.Status, resp.Body)
		}
		if resp := env.Get(policiesPath+"/"+p.ID, tok); !strings.Contains(string(resp.Body), `"priority":1`) {
			t.Errorf("after delete: %s", resp.Body)
		}
	})
}

// TestPolicies_HostileBodies: malformed or odd bodies are answered 400,
// never 500.
func TestPolicies_HostileBodies(t *testing.T) {
	db := dbtest.SQLite(t)
	env := apitest.New(t, db, apitest.Options{})
	tok := env.Token(env.Org, "svc.conditional_access_policy.all", "svc.conditional_factor_config.all")
	for _, body := range []string{
		`{}`, `[]`, `null`, `{"name": 5}`,
		`{"name":"x","access_type":"allow","endpoints_settings":[null]}`,
		`{"name":"x","access_type":"allow","endpoints_settings":[{"endpoint":"NPS"}],"access_conditions":{"conditions":[null],"criteria_expression":"1"}}`,
		`{"name":"x","access_type":"allow","endpoints_settings":[{"endpoint":"NPS"}],"user_assignments":{"user_ids":["abc", -1, 1.5]}}`,
		`{"name":"x","access_type":"allow","endpoints_settings":[{"endpoint":"NPS","primary_authentication":{"factor_configs":[{"authn_factor_config_id":"99999999999999999999"}]}}]}`,
		`{"name":"x","access_type":"allow","endpoints_settings":[{"endpoint":"NPS"}],"access_conditions":{"criteria_expression":"` + strings.Repeat("(", 5000) + `"}}`,
		`{"name":"x","access_type":"allow","endpoints":["All Endpoints"],"endpoints_settings":[{"endpoint":"NPS"}]}`,
	} {
		resp := env.Do(apitest.Request{Method: "POST", Path: policiesPath, Token: tok, Body: []byte(body), Header: http.Header{"Content-Type": {"application/json"}}})
		if resp.Status != http.StatusBadRequest {
			t.Errorf("%.80s: %d %s", body, resp.Status, resp.Body)
		}
	}
	for _, q := range []string{"ids=1", "ids=" + strings.Repeat("9", 30)} {
		resp := env.Do(apitest.Request{Method: "PUT", Path: policiesPath + "/priority", Token: tok, Body: map[string]any{"ids": strings.Split(q[4:], ",")}})
		if resp.Status != http.StatusBadRequest {
			t.Errorf("priority %s: %d %s", q, resp.Status, resp.Body)
		}
	}
	for _, body := range []string{`{"display_name":"x","ip_address_ranges":[null]}`, `{"display_name":"x","ip_addresses":5}`, `{"display_name":"x","ip_address_ranges":[{"from":"1.1.1.1"}]}`} {
		resp := env.Do(apitest.Request{Method: "POST", Path: configsPath + "/ipsources", Token: tok, Body: []byte(body), Header: http.Header{"Content-Type": {"application/json"}}})
		if resp.Status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", body, resp.Status, resp.Body)
		}
	}
}
