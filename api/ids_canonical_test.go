package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/devices"
)

// TestAdminSettings_IDsStoredCanonical: ids written with leading zeros or a
// plus sign ("0<id>", "+<id>") name the same device or device group as the
// digits alone; the settings store them in canonical form (once each), so
// that the check-in of the device they name gets offline MFA enabled.
func TestAdminSettings_IDsStoredCanonical(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.conditional_access_policy.ALL")
		key, err := env.Store.Devices.InstallKey(t.Context(), env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		direct := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		plus := registerAgent(t, env, key, agentFacts("PC2", "S2"))
		grouped := registerAgent(t, env, key, agentFacts("PC3", "S3"))
		outside := registerAgent(t, env, key, agentFacts("PC4", "S4"))
		resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/device-groups", Token: tok,
			Body: map[string]any{"name": "Offline", "device_ids": []string{"00" + grouped.id}}})
		if resp.Status != http.StatusCreated {
			t.Fatalf("create device group: %d %s", resp.Status, resp.Body)
		}
		var g struct{ Data deviceGroupBody }
		resp.JSON(t, &g)
		if g.Data.MembersCount != 1 {
			t.Fatalf("device group %+v", g.Data)
		}
		configs, err := env.Store.Factors.List(t.Context(), env.Org.ID)
		if err != nil {
			t.Fatal(err)
		}
		patch := map[string]any{"offline_mfa_settings": map[string]any{
			"is_enabled": true,
			"devices_assignment": map[string]any{
				"device_ids": []string{"0" + direct.id, "+" + plus.id, direct.id},
				"group_ids":  []string{"+0" + g.Data.ID}},
			"actions": []string{"InteractiveLogon"},
			"secondary_authentication": map[string]any{"no_of_required_factors": 1, "factor_configs": []map[string]any{
				{"authn_factor_config_id": configs[0].ID, "verification_order": 1, "is_mandatory": true}}},
		}}
		resp = env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/protection/admin-settings", Token: tok, Body: patch})
		if resp.Status != http.StatusOK {
			t.Fatalf("patch: %d %s", resp.Status, resp.Body)
		}
		var got struct {
			Data struct {
				OfflineMFA struct {
					DevicesAssignment struct {
						DeviceIDs []string `json:"device_ids"`
						GroupIDs  []string `json:"group_ids"`
					} `json:"devices_assignment"`
				} `json:"offline_mfa_settings"`
			} `json:"data"`
		}
		env.Get("/api/v1/protection/admin-settings", tok).JSON(t, &got)
		da := got.Data.OfflineMFA.DevicesAssignment
		if strings.Join(da.DeviceIDs, ",") != direct.id+","+plus.id || strings.Join(da.GroupIDs, ",") != g.Data.ID {
			t.Errorf("stored assignment %+v, want [%s %s] [%s]", da, direct.id, plus.id, g.Data.ID)
		}
		for _, c := range []struct {
			a       *agentSim
			enabled bool
		}{{direct, true}, {plus, true}, {grouped, true}, {outside, false}} {
			if mfa := c.a.checkin(nil).Settings.OfflineMFA; mfa["is_enabled"] != c.enabled {
				t.Errorf("device %s: offline MFA %v, want enabled %v", c.a.facts["name"], mfa["is_enabled"], c.enabled)
			}
		}

		// An id that names nothing in the organization is refused as
		// before, whatever its spelling; so is what is no id at all.
		for _, ids := range [][]string{{"0999"}, {"x"}, {"0"}, {"-" + direct.id}, {direct.id + " "}} {
			wantError(t, env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/protection/admin-settings", Token: tok,
				Body: map[string]any{"offline_mfa_settings": map[string]any{"devices_assignment": map[string]any{"device_ids": ids}}}}),
				400, "00000109", "offline_mfa_settings.devices_assignment.device_ids")
		}
	})
}

// TestCheckin_OfflineUserIDsCanonical: an agent reporting an offline user
// as "0<id>" and "<id>" reports one user twice (400), and "+<id>" alone is
// stored as <id>.
func TestCheckin_OfflineUserIDsCanonical(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.device.ALL")
		key, err := env.Store.Devices.InstallKey(t.Context(), env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		a := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		resp := a.checkinRaw(map[string]any{"offline_enrolled_users": []map[string]any{{"id": "0111"}, {"id": "111"}}}, "")
		wantError(t, resp, 400, "00000109", "offline_enrolled_users.id")
		a.checkin(map[string]any{"offline_enrolled_users": []map[string]any{{"id": "+0222", "user_name": "x@example.com"}}})
		resp = env.Get("/api/v1/devices/"+a.id+"/offline-enrolled-users", tok)
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `"222"`) || strings.Contains(string(resp.Body), "+0222") {
			t.Fatalf("offline users %d %s", resp.Status, resp.Body)
		}
	})
}

// TestIDBodies_SpellingsNameTheSameRow: the other bodies and queries that
// take ids read "0<id>" and "+<id>" as <id> (they parse ids into numbers),
// so that one id written twice two ways counts once, and an id of another
// organization is refused as the route refuses unknown ids.
func TestIDBodies_SpellingsNameTheSameRow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		utok := env.Token(env.Org, "svc.user.ALL")
		gtok := env.Token(env.Org, "svc.group.ALL")
		ptok := env.Token(env.Org, "svc.conditional_access_policy.ALL")
		a := createUser(t, env, utok, map[string]any{"firstName": "A", "email": "a@example.com"})
		b := createUser(t, env, utok, map[string]any{"firstName": "B", "email": "b@example.com"})
		g := groupReq(t, env, "POST", "/api/v1/groups", gtok, map[string]any{"name": "Staff", "members": []string{"0" + a.ID, a.ID}}, 201)
		if g.MembersCount != 1 {
			t.Errorf("group created with one user written twice: %+v", g)
		}
		if got := groupReq(t, env, "POST", "/api/v1/groups/"+g.ID+"/members", gtok, map[string]any{"members": []string{"+" + b.ID}}, 200); got.MembersCount != 2 {
			t.Errorf("after adding +<id>: %+v", got)
		}
		other := createUser(t, env, env.Token(env.NewOrg("Other"), "svc.user.ALL"), map[string]any{"firstName": "X", "email": "x@example.com"})
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups/" + g.ID + "/members", Token: gtok,
			Body: map[string]any{"members": []string{"0" + other.ID}}}), 400, "00000109", "members")

		key, err := env.Store.Devices.InstallKey(t.Context(), env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		dev := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/device-groups", Token: ptok,
			Body: map[string]any{"name": "Devices", "device_ids": []string{"+" + dev.id, "0" + dev.id}}})
		var dg struct{ Data deviceGroupBody }
		resp.JSON(t, &dg)
		if resp.Status != http.StatusCreated || dg.Data.MembersCount != 1 {
			t.Fatalf("device group: %d %s", resp.Status, resp.Body)
		}

		// A bulk delete of "0<id>" deletes <id>.
		resp = env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/users?ids=0" + b.ID, Token: utok})
		if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"status":204`) {
			t.Fatalf("bulk delete: %d %s", resp.Status, resp.Body)
		}
		if resp := env.Get("/api/v1/users/"+b.ID, utok); resp.Status != http.StatusNotFound {
			t.Errorf("user deleted as 0<id> still there: %d", resp.Status)
		}
	})
}
