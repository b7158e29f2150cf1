package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/devices"
)

// BenchmarkAgentCheckin is the server's side of one check-in on
// PostgreSQL, through the whole handler chain without a network, for
// profiles (-cpuprofile): unchanged reports what the device reported
// before; changed flips the last_login of one of its five accounts.
// cmd/agentbench measures `iam serve` over HTTP.
func BenchmarkAgentCheckin(b *testing.B) {
	env := apitest.New(b, dbtest.Postgres(b), apitest.Options{AgentRate: 1e9, AgentBurst: 1e9, RegistrationsPerAddress: 1e6})
	key, err := env.Store.Devices.InstallKey(b.Context(), env.Org.ID, devices.AgentDevice)
	if err != nil {
		b.Fatal(err)
	}
	h := env.Server.Handler()
	post := func(path, auth string, body []byte, want int) []byte {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	const devices = 100
	type device struct {
		auth   string
		bodies [2][]byte
	}
	devs := make([]device, devices)
	for i := range devs {
		facts := map[string]any{"name": fmt.Sprintf("pc-%d", i), "os_type": "Windows", "join_type": "SvcJoined",
			"serial_number": fmt.Sprintf("s-%d", i), "agent_version": "1.0.0", "ip_address": "10.0.0.1"}
		reg, _ := json.Marshal(map[string]any{"installation_key": key, "agent_type": "DeviceAgent", "platform": "windows", "facts": facts})
		var out struct{ DeviceID, DeviceSecret string }
		_ = json.Unmarshal(post("/agent/v1/register", "", reg, http.StatusCreated), &struct {
			ID  *string `json:"device_id"`
			Sec *string `json:"device_secret"`
		}{&out.DeviceID, &out.DeviceSecret})
		devs[i].auth = "Device " + out.DeviceID + ":" + out.DeviceSecret
		for v := range devs[i].bodies {
			accs := []map[string]any{}
			for j := range 5 {
				accs = append(accs, map[string]any{"user_name": fmt.Sprintf("user%d", j), "permission_level": "Standard",
					"last_login": fmt.Sprintf("2026-11-0%dT08:00:00Z", loginDay(j, v))})
			}
			devs[i].bodies[v], _ = json.Marshal(map[string]any{"facts": facts, "local_accounts": accs})
		}
		post("/agent/v1/checkin", devs[i].auth, devs[i].bodies[0], http.StatusOK)
	}
	b.Run("unchanged", func(b *testing.B) {
		i := 0
		for b.Loop() {
			d := devs[i%devices]
			post("/agent/v1/checkin", d.auth, d.bodies[0], http.StatusOK)
			i++
		}
	})
	b.Run("changed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			d := devs[i%devices]
			post("/agent/v1/checkin", d.auth, d.bodies[(i/devices+1)%2], http.StatusOK)
			i++
		}
		// Leave every device reporting bodies[0] again.
		for j := i; j%(2*devices) != 0; j++ {
			d := devs[j%devices]
			post("/agent/v1/checkin", d.auth, d.bodies[(j/devices+1)%2], http.StatusOK)
		}
	})
}

// loginDay is the day of the last login of account j in body variant v:
// the variants differ in the first account's only.
func loginDay(j, v int) int {
	if j == 0 {
		return 1 + v
	}
	return 1
}
