package api_test

import (
	"net/http"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/devices"
)

// TestAdminSettings_OfflineMFAReachesAssignedDevices: offline MFA settings
// patched through the API reach, at the next check-in, the devices they
// name directly or through a device group, and only those.
func TestAdminSettings_OfflineMFAReachesAssignedDevices(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.conditional_access_policy.ALL")
		key, err := env.Store.Devices.InstallKey(t.Context(), env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		direct := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		grouped := registerAgent(t, env, key, agentFacts("PC2", "S2"))
		outside := registerAgent(t, env, key, agentFacts("PC3", "S3"))
		resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/device-groups", Token: tok,
			Body: map[string]any{"name": "Offline", "device_ids": []string{grouped.id}}})
		var g struct{ Data deviceGroupBody }
		resp.JSON(t, &g)
		configs, err := env.Store.Factors.List(t.Context(), env.Org.ID)
		if err != nil {
			t.Fatal(err)
		}
		patch := map[string]any{"offline_mfa_settings": map[string]any{
			"is_enabled":         true,
			"devices_assignment": map[string]any{"device_ids": []string{direct.id}, "group_ids": []string{g.Data.ID}},
			"actions":            []string{"InteractiveLogon", "SSH"},
			"secondary_authentication": map[string]any{"no_of_required_factors": 1, "factor_configs": []map[string]any{
				{"authn_factor_config_id": configs[2].ID, "verification_order": 1, "is_mandatory": true}}},
			"offline_verification_duration": map[string]any{"value": 3, "unit": "days"},
		}}
		resp = env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/protection/admin-settings", Token: tok, Body: patch})
		if resp.Status != http.StatusOK {
			t.Fatalf("patch: %d %s", resp.Status, resp.Body)
		}
		for _, c := range []struct {
			a       *agentSim
			enabled bool
		}{{direct, true}, {grouped, true}, {outside, false}} {
			mfa := c.a.checkin(nil).Settings.OfflineMFA
			if mfa["is_enabled"] != c.enabled {
				t.Errorf("device %s: offline MFA %v, want enabled %v", c.a.facts["name"], mfa, c.enabled)
			}
			actions, _ := mfa["actions"].([]any)
			if c.enabled != (len(actions) == 2) {
				t.Errorf("device %s: actions %v", c.a.facts["name"], actions)
			}
			if da, _ := mfa["devices_assignment"].(map[string]any); len(da["device_ids"].([]any)) != 0 {
				t.Errorf("device %s sees the assignment lists: %v", c.a.facts["name"], da)
			}
		}
		// Leaving the group ends it for that device.
		if resp := env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/protection/device-groups/" + g.Data.ID + "/members?ids=" + grouped.id, Token: tok}); resp.Status != 200 {
			t.Fatalf("remove member: %d %s", resp.Status, resp.Body)
		}
		if mfa := grouped.checkin(nil).Settings.OfflineMFA; mfa["is_enabled"] != false {
			t.Errorf("after leaving the group: %v", mfa)
		}

		// Validation through the API names the field.
		for field, body := range map[string]map[string]any{
			"offline_mfa_settings.devices_assignment.group_ids":       {"offline_mfa_settings": map[string]any{"devices_assignment": map[string]any{"group_ids": []string{"999"}}}},
			"offline_mfa_settings.offline_verification_duration.unit": {"offline_mfa_settings": map[string]any{"offline_verification_duration": map[string]any{"unit": "attempts"}}},
			"account_blocking_settings.blocking_duration":             {"account_blocking_settings": map[string]any{"blocking_duration": 0}},
		} {
			wantError(t, env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/protection/admin-settings", Token: tok, Body: body}), 400, "00000109", field)
		}
		wantError(t, env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/protection/admin-settings", Token: tok,
			Body: map[string]any{"colour": "red"}}), 400, "00000109", "colour")
	})
}
