package api_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"

	"iam/activities"
	"iam/api/apitest"
	"iam/models"
	"iam/models/enrollment"
	"iam/models/management"
	"iam/models/notification"
)

// The tests that walk the route table (TestHostileBodies_NoRouteAnswers500,
// TestAuditRoutes_EveryChangeRecordsItsEvent) send each route a path naming
// real resources: seedResources makes them, routeParams fills the paths.

var pathParam = regexp.MustCompile(`:([a-z_]+)`)

// routeParams fills the path parameters of the routes: common holds one
// value per parameter; a route naming a parameter of a variant group is
// sent once per variant of the group (each condition config family with a
// config of its own, each management action with its upload and
// execution).
type routeParams struct {
	common   map[string]string
	variants [][]map[string]string
}

// sets returns the parameter values path is sent with: common, once per
// variant of each group path names a parameter of.
func (p routeParams) sets(path string) []map[string]string {
	names := pathParam.FindAllStringSubmatch(path, -1)
	sets := []map[string]string{p.common}
	for _, group := range p.variants {
		if !slices.ContainsFunc(names, func(n []string) bool { _, ok := group[0][n[1]]; return ok }) {
			continue
		}
		var next []map[string]string
		for _, set := range sets {
			for _, v := range group {
				m := maps.Clone(set)
				maps.Copy(m, v)
				next = append(next, m)
			}
		}
		sets = next
	}
	return sets
}

// fill returns path with its parameters filled, once per variant.
func (p routeParams) fill(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, set := range p.sets(path) {
		out = append(out, fillParams(t, path, set))
	}
	return out
}

// fillParams returns s with each :name replaced by set[name].
func fillParams(t *testing.T, s string, set map[string]string) string {
	t.Helper()
	return pathParam.ReplaceAllStringFunc(s, func(name string) string {
		v, ok := set[name[1:]]
		if !ok {
			t.Fatalf("no value for the parameter %s of %s", name, s)
		}
		return v
	})
}

// createdID posts body (JSON, or a form with its content type) to path,
// requires 201 and returns the id of what was created, at the top level or
// under data.
func createdID(t *testing.T, env *apitest.Env, path, tok string, body any, contentType string) string {
	t.Helper()
	req := apitest.Request{Method: "POST", Path: path, Token: tok, Body: body}
	if contentType != "" {
		req.Header = http.Header{"Content-Type": {contentType}}
	}
	resp := env.Do(req)
	if resp.Status != http.StatusCreated {
		t.Fatalf("POST %s: %d %s", path, resp.Status, resp.Body)
	}
	id := answeredID(resp)
	if id == "" {
		t.Fatalf("POST %s answered no id: %s", path, resp.Body)
	}
	return id
}

// answeredID returns the id an answer names, at the top level or under
// data; "" when it names none.
func answeredID(resp *apitest.Response) string {
	var out struct {
		ID   json.Number `json:"id"`
		Data struct {
			ID json.Number `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(resp.Body, &out) != nil {
		return ""
	}
	if out.Data.ID != "" {
		return out.Data.ID.String()
	}
	return out.ID.String()
}

// seeded is what seedResources made.
type seeded struct {
	// params name every resource a path names.
	params routeParams
	// aud is a static group of three users, an administrator outside it
	// and a template.
	aud *audience
	// configs are the condition configs' ids by family.
	configs map[string]string
}

// seedResources creates one real instance of every resource a path names,
// so that a request gets past the lookup of its path: the registered device
// dev with a local account (alice), a user, a static group, a device group,
// a condition config of each family, a conditional access policy, a CA of
// the smart card factor config, a template, a schedule with a run, a job,
// and an upload and an execution of each management action; and it names
// an event of the audit log. tok holds every scope.
func seedResources(t *testing.T, env *apitest.Env, tok string, dev *agentSim) *seeded {
	t.Helper()
	ctx := t.Context()
	aud := newAudience(t, env, env.Org, 3, 0) // a static group, a template, users
	dev.checkin(map[string]any{"local_accounts": localAccounts("alice")})
	account := deviceAccounts(t, env, tok, dev.id)["alice"]
	if account.ID == 0 {
		t.Fatal("the device has no local account alice")
	}

	configs := map[string]string{}
	for family, body := range map[string]map[string]any{
		"businesshours": {"display_name": "Office", "business_hours_bitmap": officeHours(), "timezone": "Europe/Paris"},
		"geolocations":  {"display_name": "EU", "countries": []string{"FR"}},
		"ipsources":     {"display_name": "HQ", "is_trusted_source": true, "ip_addresses": "192.0.2.0/24"},
	} {
		configs[family] = createdID(t, env, "/api/v1/protection/conditionalfactor-configs/"+family, tok, body, "")
	}
	policy := createdID(t, env, "/api/v1/protection/conditional-access-policies", tok, map[string]any{
		"name": "HQ only", "access_type": "deny",
		"access_conditions": map[string]any{"criteria_expression": "1", "conditions": []map[string]any{
			{"sequence_number": 1, "factor_type": "ipaddress", "comparator": "not_in", "factor_configs": []string{configs["ipsources"]}}}},
		"endpoints_settings": []map[string]any{{"endpoint": "IIS"}}}, "")
	deviceGroup := createdID(t, env, "/api/v1/protection/device-groups", tok, map[string]any{"name": "Kiosks", "device_ids": []string{dev.id}}, "")

	smartCard := factorIDs(t, env, env.Org)[enrollment.FactorSmartCard]
	ca := newTestCA(t, "Seeded CA", true, time.Now().Add(365*24*time.Hour))
	caBody, caType := caForm(t, map[string]string{"certificate_mapping_attribute": "email"}, ca.der)
	caConfig := createdID(t, env, "/api/v1/protection/authnfactor-configs/"+smartCard+"/ca-configs", tok, caBody, caType)

	removeTemporalSchedules(t, env)
	schedule := createdID(t, env, schedulesPath, tok, aud.body("Reminder"), "")
	scheduleID, _ := models.ParseID("schedule_id", schedule)
	run, err := env.Store.Notifications.PrepareRun(ctx, notification.PrepareRunInput{OrgID: env.Org.ID, ScheduleID: scheduleID,
		ScheduledAt: time.Date(2026, 5, 4, 9, 30, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	job := env.CreateDiagnostic(env.Org, activities.DiagnosticParams{Items: 1})

	// An upload (through the API) and a queued execution (through the
	// store: its workflow is never started) of each action.
	var actions []map[string]string
	for _, action := range []management.MgmtAction{management.ActionDeleteUsers, management.ActionMoveUsers} {
		csv, h := csvUpload(t, []byte("Primary Email\n"+aud.users[0].Email+"\n"), "", false)
		upload := createdID(t, env, mgmtBase+string(action)+"/uploads", tok, csv, h.Get("Content-Type"))
		n := management.NewExecution{OrgID: env.Org.ID, Action: action, Selection: management.Selection{UserIDs: []int64{aud.users[1].ID}}, CreatedBy: aud.admin.ID}
		if action == management.ActionMoveUsers {
			n.TargetContainer = "OU=Staff,DC=example,DC=com"
		}
		exec, _, err := env.Store.Management.CreateExecution(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		actions = append(actions, map[string]string{"action_id": string(action), "upload_id": upload, "execution_id": models.FormatID(exec.ID)})
	}

	// An event hook (disabled: nothing is sent) with a delivery, its test.
	hook := createdID(t, env, "/api/v1/event-hooks", tok, map[string]any{"url": "https://hooks.example.com/seeded",
		"event_types": []string{"user.*"}, "enabled": false}, "")
	hookID, _ := models.ParseID("hook_id", hook)
	delivery, herr := env.Store.Hooks.Test(ctx, env.Org.ID, hookID)
	if herr != nil {
		t.Fatal(herr)
	}

	// An event of the audit log (the seeding wrote many).
	var events struct {
		Data []struct {
			ID string `json:"id"`
		}
	}
	env.Get("/api/v1/audit-events?limit=1", tok).JSON(t, &events)
	if len(events.Data) == 0 {
		t.Fatal("the seeding wrote no audit event")
	}

	var families []map[string]string
	for family, id := range configs {
		families = append(families, map[string]string{"family": family, "config_id": id})
	}
	params := routeParams{
		common: map[string]string{
			"account_id": models.FormatID(account.ID), "agent_type": "DeviceAgent", "authnfactor_config_id": smartCard,
			"ca_config_id": caConfig, "device_group_id": deviceGroup, "device_id": dev.id, "event_id": events.Data[0].ID, "group_id": models.FormatID(aud.group),
			"job_id": models.FormatID(job.ID), "policy_id": policy, "run_id": models.FormatID(run.ID), "schedule_id": schedule,
			"template_id": models.FormatID(aud.template.ID), "user_id": models.FormatID(aud.admin.ID),
			"hook_id": hook, "delivery_id": models.FormatID(delivery.ID),
		},
		variants: [][]map[string]string{families, actions},
	}
	return &seeded{params: params, aud: aud, configs: configs}
}
