package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/identity"
)

// agentSim is one device agent talking to the test API.
type agentSim struct {
	t      *testing.T
	env    *apitest.Env
	id     string
	secret string
	facts  map[string]any
}

func agentFacts(name, serial string) map[string]any {
	return map[string]any{"name": name, "os_type": "Windows", "join_type": "ADJoined", "serial_number": serial,
		"agent_version": "1.0.0", "ip_address": "10.1.2.3", "dns_hostname": strings.ToLower(name) + ".corp"}
}

func registerAgent(t *testing.T, env *apitest.Env, key string, facts map[string]any) *agentSim {
	t.Helper()
	resp := env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register", Body: map[string]any{
		"installation_key": key, "agent_type": "DeviceAgent", "platform": "windows", "facts": facts}})
	if resp.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", resp.Status, resp.Body)
	}
	var out struct {
		DeviceID     string `json:"device_id"`
		DeviceSecret string `json:"device_secret"`
		Interval     int    `json:"checkin_interval_seconds"`
	}
	resp.JSON(t, &out)
	if out.Interval != 60 {
		t.Errorf("interval %d", out.Interval)
	}
	return &agentSim{t: t, env: env, id: out.DeviceID, secret: out.DeviceSecret, facts: facts}
}

type checkinAnswer struct {
	Commands []map[string]any `json:"commands"`
	Settings struct {
		AccountLinking *struct {
			LinkRestricted []string `json:"link_restricted_local_accounts"`
		} `json:"account_linking"`
		OfflineMFA map[string]any `json:"offline_mfa"`
	} `json:"settings"`
	Next int `json:"next_checkin_seconds"`
}

func (a *agentSim) checkinRaw(body map[string]any, auth string) *apitest.Response {
	a.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if _, ok := body["facts"]; !ok {
		body["facts"] = a.facts
	}
	if auth == "" {
		auth = "Device " + a.id + ":" + a.secret
	}
	return a.env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/checkin", Body: body,
		Header: http.Header{"Authorization": {auth}}})
}

func (a *agentSim) checkin(body map[string]any) checkinAnswer {
	a.t.Helper()
	resp := a.checkinRaw(body, "")
	if resp.Status != http.StatusOK {
		a.t.Fatalf("check-in: %d %s", resp.Status, resp.Body)
	}
	var out checkinAnswer
	resp.JSON(a.t, &out)
	return out
}

func localAccounts(names ...string) []map[string]any {
	out := []map[string]any{}
	for _, n := range names {
		out = append(out, map[string]any{"user_name": n, "permission_level": "Standard"})
	}
	return out
}

func TestAgent_RegisterAndCheckIn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		ctx := t.Context()
		key, err := env.Store.Devices.InstallKey(ctx, env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		reg := func(body map[string]any) *apitest.Response {
			return env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register", Body: body})
		}
		wantError(t, reg(map[string]any{"installation_key": "nope", "agent_type": "DeviceAgent", "platform": "windows", "facts": agentFacts("PC", "S")}),
			401, "00000101", "installation key")
		bad := agentFacts("PC", "S")
		bad["os_type"] = "Plan9"
		wantError(t, reg(map[string]any{"installation_key": key, "agent_type": "DeviceAgent", "platform": "windows", "facts": bad}), 400, "00000109", "os_type")
		bad = agentFacts("PC", "S")
		bad["color"] = "red"
		wantError(t, reg(map[string]any{"installation_key": key, "agent_type": "DeviceAgent", "platform": "windows", "facts": bad}), 400, "00000109", "color")

		a := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		ans := a.checkin(map[string]any{"local_accounts": localAccounts("alice", "bob")})
		if len(ans.Commands) != 0 || ans.Next != 60 || ans.Settings.AccountLinking == nil || ans.Settings.OfflineMFA == nil {
			t.Fatalf("first check-in %+v", ans)
		}

		// Wrong, missing or foreign credentials.
		wantError(t, a.checkinRaw(nil, "Device "+a.id+":"+a.secret+"x"), 401, "00000101", "device credential")
		wantError(t, a.checkinRaw(nil, "Device "+a.id), 401, "00000101", "device credential")
		wantError(t, a.checkinRaw(nil, "Service-oauthtoken "+env.Token(env.Org, "svc.device.ALL")), 401, "00000101", "Device")
		wantError(t, a.checkinRaw(map[string]any{"local_accounts": []map[string]any{{"user_name": "x", "permission_level": "God"}}}, ""), 400, "00000109", "permission_level")

		// An admin links alice; the next check-in carries the command, the
		// ack makes the link.
		id, _ := models.ParseID("id", a.id)
		accs, _ := env.Store.Devices.Accounts(ctx, env.Org.ID, id)
		u := &identity.User{OrgID: env.Org.ID, Email: "alice@example.com", Status: identity.UserActive}
		if err = env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		if _, err = env.Store.Devices.Link(ctx, env.Org.ID, id, accs[0].ID, devices.LinkRequest{UserID: u.ID, PermissionLevel: "Administrator"}); err != nil {
			t.Fatal(err)
		}
		ans = a.checkin(map[string]any{"local_accounts": localAccounts("alice", "bob")})
		if len(ans.Commands) != 1 {
			t.Fatalf("commands %+v", ans.Commands)
		}
		c := ans.Commands[0]
		if c["type"] != "link" || c["user_name"] != "alice" || c["idp_user_id"] != models.FormatID(u.ID) ||
			c["permission_level"] != "Administrator" || c["account_id"] != models.FormatID(accs[0].ID) {
			t.Errorf("link command %v", c)
		}
		ans = a.checkin(map[string]any{"local_accounts": localAccounts("alice", "bob"),
			"acks": []map[string]any{{"command_id": c["id"], "status": "done"}}})
		if len(ans.Commands) != 0 {
			t.Errorf("after ack %+v", ans.Commands)
		}
		acc, _ := env.Store.Devices.Account(ctx, env.Org.ID, id, accs[0].ID)
		if acc.LinkStatus != devices.LinkLinked {
			t.Errorf("link status %s", acc.LinkStatus)
		}

		// A superseded key admits nothing; the registered device goes on.
		fresh, err := env.Store.Devices.RegenerateInstallKey(ctx, env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, reg(map[string]any{"installation_key": key, "agent_type": "DeviceAgent", "platform": "windows", "facts": agentFacts("PC2", "S2")}),
			401, "00000101", "superseded")
		a.checkin(nil)
		registerAgent(t, env, fresh, agentFacts("PC2", "S2"))
	})
}

func TestAgent_Limits(t *testing.T) {
	db := dbtest.SQLite(t)
	env := apitest.New(t, db, apitest.Options{AgentRate: 0.001, AgentBurst: 3})
	key, err := env.Store.Devices.InstallKey(t.Context(), env.Org.ID, devices.AgentDevice)
	if err != nil {
		t.Fatal(err)
	}
	a := registerAgent(t, env, key, agentFacts("PC1", "S1"))
	b := registerAgent(t, env, key, agentFacts("PC2", "S2"))
	for i := 0; i < 3; i++ {
		a.checkin(nil)
	}
	resp := a.checkinRaw(nil, "")
	wantError(t, resp, 429, "00000112", "too often")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	b.checkin(nil) // per device

	// Size limits: the body, and the count of accounts.
	huge := strings.Repeat("x", 3<<20)
	resp = b.checkinRaw(map[string]any{"facts": map[string]any{"name": huge}}, "")
	wantError(t, resp, 413, "00000110", "bytes")
	names := make([]string, devices.MaxLocalAccounts+1)
	for i := range names {
		names[i] = fmt.Sprintf("u%d", i)
	}
	wantError(t, b.checkinRaw(map[string]any{"local_accounts": localAccounts(names...)}, ""), 400, "00000109", "local_accounts")
}

// A check-in of the very bytes of the device's last accepted one is the
// same report only while the device's row still holds what it reported:
// once another process recorded a different report, the same bytes are
// decoded and recorded again. Such a check-in still answers the device's
// pending commands.
func TestAgent_SameBytesCheckIn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{AgentRate: 1000, AgentBurst: 1000})
		ctx := t.Context()
		key, err := env.Store.Devices.InstallKey(ctx, env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		a := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		id, _ := models.ParseID("id", a.id)
		body := func() map[string]any { return map[string]any{"local_accounts": localAccounts("alice", "bob")} }
		a.checkin(body())
		a.checkin(body()) // the same bytes: the same report

		// Another process records a different report (bob gone).
		dev, err := env.Store.Devices.AuthenticateCheckIn(ctx, id, a.secret)
		if err != nil {
			t.Fatal(err)
		}
		other := devices.CheckIn{Facts: devices.DeviceFacts{Name: "PC1", OSType: "Windows", JoinType: "ADJoined", SerialNumber: "S1"},
			Accounts: []devices.AccountReport{{UserName: "alice", PermissionLevel: "Standard"}}}
		if err := other.Validate(); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Store.Devices.CheckIn(ctx, dev, &other); err != nil {
			t.Fatal(err)
		}
		// The same bytes again: bob is back, and so are the facts.
		a.checkin(body())
		accs, _ := env.Store.Devices.Accounts(ctx, env.Org.ID, id)
		got, _ := env.Store.Devices.Get(ctx, env.Org.ID, id)
		if len(accs) != 2 || got.DNSHostname != "pc1.corp" || got.TotalLocalAccounts != 2 {
			t.Errorf("after the same bytes: %d accounts (%d counted), dns_hostname %q", len(accs), got.TotalLocalAccounts, got.DNSHostname)
		}

		// A pending command reaches an unchanged check-in of the same bytes.
		u := &identity.User{OrgID: env.Org.ID, Email: "alice@example.com", Status: identity.UserActive}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Store.Devices.Link(ctx, env.Org.ID, id, accs[0].ID, devices.LinkRequest{UserID: u.ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if ans := a.checkin(body()); len(ans.Commands) != 1 || ans.Commands[0]["type"] != "link" {
				t.Fatalf("commands %+v", ans.Commands)
			}
		}
	})
}
