package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/devices"
)

type accountBody struct {
	ID             int64   `json:"id"`
	UserName       string  `json:"user_name"`
	IsIdpLinked    bool    `json:"is_idp_linked"`
	LinkStatus     string  `json:"link_status"`
	IdpUserID      *string `json:"idp_user_id"`
	IdpUserDetails *struct {
		UserName   string  `json:"user_name"`
		LinkType   string  `json:"link_type"`
		LinkStatus string  `json:"link_status"`
		LinkedAt   *string `json:"linked_at"`
	} `json:"idp_user_details"`
}

func deviceAccounts(t *testing.T, env *apitest.Env, tok, devID string) map[string]accountBody {
	t.Helper()
	resp := env.Get("/api/v1/devices/"+devID+"/accounts", tok)
	if resp.Status != 200 {
		t.Fatalf("accounts: %d %s", resp.Status, resp.Body)
	}
	var out struct{ Data []accountBody }
	resp.JSON(t, &out)
	m := map[string]accountBody{}
	for _, a := range out.Data {
		m[a.UserName] = a
	}
	return m
}

// The whole life of a device through the API and the agent channel.
func TestDevices_AgentLifecycle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.device.ALL")
		cap := env.Token(env.Org, "svc.conditional_access_policy.ALL")
		utok := env.Token(env.Org, "svc.user.ALL")

		// agents-info hands out the key; the agent registers with it.
		resp := env.Get("/api/v1/protection/agents-info", cap)
		var info struct {
			Data []struct {
				Type            string `json:"type"`
				Version         string `json:"version"`
				InstallationKey string `json:"installation_key"`
				Platforms       []struct {
					Name                string `json:"name"`
					Version             string `json:"version"`
					InstallationDetails struct {
						InstalledCount int `json:"installed_count"`
						Total          int `json:"total_devices_count"`
					} `json:"installation_details"`
				} `json:"platforms"`
			} `json:"data"`
		}
		resp.JSON(t, &info)
		if resp.Status != 200 || len(info.Data) != 3 || info.Data[0].Type != "DeviceAgent" || len(info.Data[0].Platforms) != 3 {
			t.Fatalf("agents-info %d %s", resp.Status, resp.Body)
		}
		a := registerAgent(t, env, info.Data[0].InstallationKey, agentFacts("PC1", "S1"))
		a.facts["join_type"] = "SvcJoined"
		offlineUsers := []map[string]any{{"id": "111", "user_name": "x@example.com"}, {"id": "222"}, {"id": "333"}}
		report := func(acks ...map[string]any) map[string]any {
			b := map[string]any{"local_accounts": localAccounts("alice", "bob"), "offline_enrolled_users": offlineUsers}
			if len(acks) > 0 {
				b["acks"] = acks
			}
			return b
		}
		a.checkin(report())
		resp = env.Get("/api/v1/protection/agents-info", cap)
		resp.JSON(t, &info)
		if p := info.Data[0].Platforms[0]; p.Name != "windows" || p.Version != "1.0.0" || p.InstallationDetails.InstalledCount != 1 || p.InstallationDetails.Total != 1 {
			t.Errorf("windows platform %+v", p)
		}

		// List and get.
		resp = env.Get(`/api/v1/devices?filter=os_type%20eq%20"Windows"&sort=-name&fields=name,agent_status`, tok)
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `"agent_status":"active"`) || !strings.Contains(string(resp.Body), `"next_cursor"`) {
			t.Fatalf("list %d %s", resp.Status, resp.Body)
		}
		resp = env.Get("/api/v1/devices/"+a.id, tok)
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `"total_local_accounts":2`) {
			t.Fatalf("get %d %s", resp.Status, resp.Body)
		}
		other := env.Token(env.NewOrg("Other"), "svc.device.ALL")
		e := env.Get("/api/v1/devices/"+a.id, other)
		if e.Status != 404 || e.ErrorBody(t).Title != "Device Not Found" {
			t.Errorf("another organization's device: %d %s", e.Status, e.Body)
		}

		// An admin links alice; the next check-in carries the command; the
		// ack makes the link.
		user := createUser(t, env, utok, map[string]any{"firstName": "Alice", "email": "alice@example.com"})
		accs := deviceAccounts(t, env, tok, a.id)
		alice := accs["alice"]
		linkPath := "/api/v1/devices/" + a.id + "/accounts/" + models.FormatID(alice.ID)
		resp = env.Do(apitest.Request{Method: "POST", Path: linkPath + "/link", Token: tok, Body: map[string]any{"permission_level": "Administrator", "idp_user_id": user.ID}})
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `"link_status":"pending_link"`) {
			t.Fatalf("link %d %s", resp.Status, resp.Body)
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: linkPath + "/unlink", Token: tok, Body: map[string]any{}}), 409, "00000105", "pending_link")
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/devices/" + a.id + "/accounts/" + models.FormatID(accs["bob"].ID) + "/link", Token: tok,
			Body: map[string]any{"permission_level": "Standard", "idp_user_id": user.ID}}), 409, "00000105", "alice")
		ans := a.checkin(report())
		if len(ans.Commands) != 1 || ans.Commands[0]["type"] != "link" || ans.Commands[0]["idp_user_id"] != user.ID {
			t.Fatalf("commands %+v", ans.Commands)
		}
		a.checkin(report(map[string]any{"command_id": ans.Commands[0]["id"], "status": "done"}))
		alice = deviceAccounts(t, env, tok, a.id)["alice"]
		if !alice.IsIdpLinked || alice.IdpUserDetails == nil || alice.IdpUserDetails.UserName != "alice@example.com" ||
			alice.IdpUserDetails.LinkType != "Manual" || alice.IdpUserDetails.LinkedAt == nil {
			t.Fatalf("after ack %+v", alice)
		}

		// Unlink at once, with a command.
		resp = env.Do(apitest.Request{Method: "POST", Path: linkPath + "/unlink", Token: tok, Body: map[string]any{"reason": "left"}})
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `"link_status":"unlinked"`) {
			t.Fatalf("unlink %d %s", resp.Status, resp.Body)
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: linkPath + "/cancel-link", Token: tok}), 409, "00000105", "unlinked")
		ans = a.checkin(report())
		if len(ans.Commands) != 1 || ans.Commands[0]["type"] != "unlink" {
			t.Fatalf("commands %+v", ans.Commands)
		}
		a.checkin(report(map[string]any{"command_id": ans.Commands[0]["id"], "status": "done"}))

		// The history, newest first, filtered.
		resp = env.Get(`/api/v1/device-account-linking/history?filter=user_name%20eq%20"alice"&sort=created_at`, tok)
		var hist struct {
			Data []struct {
				Action   string `json:"action"`
				OldState string `json:"old_state"`
				NewState string `json:"new_state"`
				Reason   string `json:"reason"`
				Actor    string `json:"actor"`
			}
		}
		resp.JSON(t, &hist)
		var moves []string
		for _, h := range hist.Data {
			moves = append(moves, h.Action+":"+h.OldState+">"+h.NewState)
		}
		if resp.Status != 200 || strings.Join(moves, ",") != "link:unlinked>pending_link,link_confirmed:pending_link>linked,unlink:linked>unlinked" ||
			hist.Data[2].Reason != "left" || hist.Data[1].Actor != "agent" {
			t.Errorf("history %d %v %s", resp.Status, moves, resp.Body)
		}

		// Offline users: list, bulk and single delete.
		offline := "/api/v1/devices/" + a.id + "/offline-enrolled-users"
		resp = env.Get(offline, tok)
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `"total_no_of_objects":3`) {
			t.Fatalf("offline users %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "DELETE", Path: offline + "?ids=111,999", Token: tok})
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `{"resource_id":"111","status":204}`) || !strings.Contains(string(resp.Body), `"resource_id":"999","status":404`) {
			t.Fatalf("bulk delete %d %s", resp.Status, resp.Body)
		}
		if resp = env.Do(apitest.Request{Method: "DELETE", Path: offline + "/222", Token: tok}); resp.Status != 204 {
			t.Fatalf("single delete %d %s", resp.Status, resp.Body)
		}
		wantError(t, env.Do(apitest.Request{Method: "DELETE", Path: offline + "/222", Token: tok}), 404, "00000103", "not enrolled")
		wantError(t, env.Do(apitest.Request{Method: "DELETE", Path: offline + "?ids=333", Token: env.Token(env.Org, "svc.device.READ")}), 403, "00000102", "")
		wantError(t, env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/devices/42/offline-enrolled-users?ids=333", Token: tok}), 404, "00000103", "device")
		if resp = env.Get(offline, tok); !strings.Contains(string(resp.Body), `"total_no_of_objects":1`) {
			t.Errorf("after deletes %s", resp.Body)
		}
		ans = a.checkin(report())
		if len(ans.Commands) != 2 || ans.Commands[0]["type"] != "remove_offline_user" || ans.Commands[0]["user_id"] != "111" {
			t.Fatalf("commands %+v", ans.Commands)
		}

		// Delete: a SvcJoined device goes; the agent gets uninstall only,
		// acknowledges it, and is then refused.
		resp = env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/devices/" + a.id, Token: tok})
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `"deleted":true`) {
			t.Fatalf("delete %d %s", resp.Status, resp.Body)
		}
		if e := env.Get("/api/v1/devices/"+a.id, tok); e.Status != 404 {
			t.Errorf("deleted device: %d", e.Status)
		}
		ans = a.checkin(nil)
		if len(ans.Commands) != 1 || ans.Commands[0]["type"] != "uninstall" {
			t.Fatalf("commands after delete %+v", ans.Commands)
		}
		a.checkin(map[string]any{"acks": []map[string]any{{"command_id": ans.Commands[0]["id"], "status": "done"}}})
		wantError(t, a.checkinRaw(nil, ""), 401, "00000101", "device credential")
	})
}

func TestDevices_AgentsKeysAndPackages(t *testing.T) {
	db := dbtest.SQLite(t)
	env := apitest.New(t, db, apitest.Options{})
	cap := env.Token(env.Org, "svc.conditional_access_policy.ALL")
	old, err := env.Store.Devices.InstallKey(t.Context(), env.Org.ID, devices.AgentDevice)
	if err != nil {
		t.Fatal(err)
	}
	resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/agents-info/DeviceAgent/regenerate-install-key", Token: cap})
	var out struct {
		Data struct {
			Key string `json:"installation_key"`
		} `json:"data"`
	}
	resp.JSON(t, &out)
	if resp.Status != 200 || out.Data.Key == old || len(out.Data.Key) != 43 {
		t.Fatalf("regenerate %d %s", resp.Status, resp.Body)
	}
	wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register", Body: map[string]any{
		"installation_key": old, "agent_type": "DeviceAgent", "platform": "linux", "facts": agentFacts("L", "L1")}}), 401, "00000101", "superseded")
	registerAgent(t, env, out.Data.Key, agentFacts("L", "L1"))

	resp = env.Get("/api/v1/protection/agents-info/DeviceAgent/download?platform=linux", cap)
	sum := sha256.Sum256(resp.Body)
	if resp.Status != 200 || string(resp.Body) != "package DeviceAgent-linux-1.0.0.tar.gz" ||
		resp.Header.Get("Content-Disposition") != `attachment; filename="DeviceAgent-linux-1.0.0.tar.gz"` ||
		resp.Header.Get("X-Checksum-SHA256") != hex.EncodeToString(sum[:]) {
		t.Fatalf("download %d %v %s", resp.Status, resp.Header, resp.Body)
	}
	wantError(t, env.Get("/api/v1/protection/agents-info/DeviceAgent/download", cap), 400, "00000107", "platform")
	wantError(t, env.Get("/api/v1/protection/agents-info/Nope/download", cap), 404, "00000103", "Nope")

	bare := apitest.New(t, dbtest.SQLite(t), apitest.Options{AgentPackagesDir: t.TempDir()})
	resp = bare.Get("/api/v1/protection/agents-info/IISModule/download", bare.Token(bare.Org, "svc.conditional_access_policy.READ"))
	wantError(t, resp, 404, "00000103", "IAM_AGENT_PACKAGES_DIR")
	if e := resp.ErrorBody(t); e.Title != "Agent Package Not Found" {
		t.Errorf("title %q", e.Title)
	}
	_ = http.StatusOK
}
