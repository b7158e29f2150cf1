package api_test

import (
	"net/http"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models/dbtest"
	devicesmodel "iam/models/devices"
)

// agentsInfo returns each agent type's installation key and status.
func agentsInfoByType(t *testing.T, env *apitest.Env, tok string) map[string][2]string {
	t.Helper()
	resp := env.Get("/api/v1/protection/agents-info", tok)
	if resp.Status != http.StatusOK {
		t.Fatalf("agents-info: %d %s", resp.Status, resp.Body)
	}
	var info struct {
		Data []struct {
			Type                string `json:"type"`
			InstallationKey     string `json:"installation_key"`
			InstallationDetails struct {
				Status string `json:"status"`
			} `json:"installation_details"`
		} `json:"data"`
	}
	resp.JSON(t, &info)
	out := map[string][2]string{}
	for _, a := range info.Data {
		out[a.Type] = [2]string{a.InstallationKey, a.InstallationDetails.Status}
	}
	return out
}

func registerServer(env *apitest.Env, key, agentType, platform string, facts map[string]any) *apitest.Response {
	return env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register", Body: map[string]any{
		"installation_key": key, "agent_type": agentType, "platform": platform, "facts": facts}})
}

// The NPS extension and the IIS module register with their own type's
// installation key; agents-info then shows them installed. They are no
// devices; a key of another type, a superseded key or another platform
// is refused.
func TestAgent_ServerComponentsRegister(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		cap := env.Token(env.Org, "svc.conditional_access_policy.ALL")
		info := agentsInfoByType(t, env, cap)
		for _, typ := range []string{devicesmodel.AgentNPS, devicesmodel.AgentIIS, devicesmodel.AgentDevice} {
			if info[typ][1] != "not_installed" || info[typ][0] == "" {
				t.Fatalf("%s before any registration: %v", typ, info[typ])
			}
		}
		nps, iis := info[devicesmodel.AgentNPS][0], info[devicesmodel.AgentIIS][0]
		facts := agentFacts("NPS1", "NPS-SERIAL")
		if r := registerServer(env, iis, devicesmodel.AgentNPS, "windows", facts); r.Status != http.StatusUnauthorized {
			t.Fatalf("NPS with the IIS key: %d %s", r.Status, r.Body)
		}
		if r := registerServer(env, nps, devicesmodel.AgentNPS, "linux", facts); r.Status != http.StatusBadRequest {
			t.Fatalf("NPS on linux: %d %s", r.Status, r.Body)
		}
		r := registerServer(env, nps, devicesmodel.AgentNPS, "windows", facts)
		if r.Status != http.StatusCreated {
			t.Fatalf("NPS register: %d %s", r.Status, r.Body)
		}
		var first agentRegisterAnswer
		r.JSON(t, &first)
		if first.DeviceID == "" || first.DeviceSecret == "" || first.Interval != 60 {
			t.Fatalf("NPS registered %s", r.Body)
		}
		info = agentsInfoByType(t, env, cap)
		if info[devicesmodel.AgentNPS][1] != "installed" || info[devicesmodel.AgentIIS][1] != "not_installed" || info[devicesmodel.AgentDevice][1] != "not_installed" {
			t.Fatalf("after the NPS registration: %v", info)
		}
		// The same server again takes over its installation.
		r = registerServer(env, nps, devicesmodel.AgentNPS, "windows", facts)
		var again agentRegisterAnswer
		r.JSON(t, &again)
		if r.Status != http.StatusCreated || again.DeviceID != first.DeviceID || again.DeviceSecret == first.DeviceSecret {
			t.Fatalf("NPS registering again: %d %s (first %s)", r.Status, r.Body, first.DeviceID)
		}
		if r := registerServer(env, iis, devicesmodel.AgentIIS, "windows", agentFacts("WEB1", "WEB-SERIAL")); r.Status != http.StatusCreated {
			t.Fatalf("IIS register: %d %s", r.Status, r.Body)
		}
		info = agentsInfoByType(t, env, cap)
		if info[devicesmodel.AgentIIS][1] != "installed" {
			t.Fatalf("after the IIS registration: %v", info)
		}
		counts, err := env.Store.Devices.InstallationCounts(t.Context(), env.Org.ID)
		if err != nil || counts[devicesmodel.AgentNPS] != 1 || counts[devicesmodel.AgentIIS] != 1 {
			t.Fatalf("installations %v %v", counts, err)
		}
		// No device was made.
		var devices struct{ Data []any }
		resp := env.Get("/api/v1/devices", env.Token(env.Org, "svc.device.READ"))
		if resp.JSON(t, &devices); resp.Status != 200 || len(devices.Data) != 0 {
			t.Fatalf("devices after server registrations: %d %s", resp.Status, resp.Body)
		}
		// A regenerated key supersedes the old one.
		resp = env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/agents-info/NPSExtension/regenerate-install-key", Token: cap})
		if resp.Status != http.StatusOK {
			t.Fatalf("regenerate: %d %s", resp.Status, resp.Body)
		}
		if r := registerServer(env, nps, devicesmodel.AgentNPS, "windows", agentFacts("NPS2", "NPS-2")); r.Status != http.StatusUnauthorized {
			t.Fatalf("NPS with the superseded key: %d %s", r.Status, r.Body)
		}
		if r := registerServer(env, agentsInfoByType(t, env, cap)[devicesmodel.AgentNPS][0], devicesmodel.AgentNPS, "windows", agentFacts("NPS2", "NPS-2")); r.Status != http.StatusCreated {
			t.Fatalf("NPS with the new key: %d %s", r.Status, r.Body)
		}
	})
}

type agentRegisterAnswer struct {
	DeviceID     string `json:"device_id"`
	DeviceSecret string `json:"device_secret"`
	Interval     int    `json:"checkin_interval_seconds"`
}
