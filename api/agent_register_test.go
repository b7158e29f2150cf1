package api_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/identity"
)

func registerBody(key string, facts map[string]any) map[string]any {
	return map[string]any{"installation_key": key, "agent_type": "DeviceAgent", "platform": "windows", "facts": facts}
}

// 2,000 registrations from one address, with the organization's key and
// the default limits: most answer 429 with Retry-After, as many as the
// address's burst are admitted.
func TestAgent_RegistrationsPerAddress(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		key := installKey(t, env)
		counts := map[int]int{}
		for i := range 2000 {
			resp := env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register",
				Body: registerBody(key, agentFacts(fmt.Sprintf("PC%d", i), fmt.Sprintf("S%d", i)))})
			counts[resp.Status]++
			if resp.Status == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		}
		if counts[http.StatusTooManyRequests] < 1900 || counts[http.StatusCreated] > 100 ||
			counts[http.StatusCreated]+counts[http.StatusTooManyRequests] != 2000 {
			t.Fatalf("2,000 registrations from one address: %v; want most 429", counts)
		}
		n, err := env.DB.NewSelect().Table("devices").Where("org_id = ?", env.Org.ID).Count(t.Context())
		if err != nil || int(n) != counts[http.StatusCreated] {
			t.Fatalf("%d devices (%v), %d registered", n, err, counts[http.StatusCreated])
		}
	})
}

// The limits follow the client address the trusted-proxy rules compute;
// one installation key has a limit of its own across addresses; wrong
// keys from an address soon refuse that address, and only that one.
func TestAgent_RegistrationsPerKeyAndBadKeys(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{RegistrationsPerAddress: 3, RegistrationsPerKey: 8,
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
		key := installKey(t, env)
		n := 0
		register := func(from, key string) *apitest.Response {
			n++
			return env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register",
				Body:   registerBody(key, agentFacts(fmt.Sprintf("PC%d", n), fmt.Sprintf("S%d", n))),
				Header: http.Header{"X-Forwarded-For": {from}}})
		}
		// Per address: three from 198.51.100.1, then 429; another address
		// still registers.
		for i := range 4 {
			want := map[bool]int{true: http.StatusCreated, false: http.StatusTooManyRequests}[i < 3]
			if resp := register("198.51.100.1", key); resp.Status != want {
				t.Fatalf("registration %d from one address: %d %s, want %d", i+1, resp.Status, resp.Body, want)
			}
		}
		// Per key: eight in all, whatever the addresses.
		for i := range 6 {
			want := map[bool]int{true: http.StatusCreated, false: http.StatusTooManyRequests}[i < 5]
			if resp := register(fmt.Sprintf("198.51.100.%d", 10+i), key); resp.Status != want {
				t.Fatalf("registration %d with the key: %d %s, want %d", 4+i, resp.Status, resp.Body, want)
			}
		}
		// Wrong keys: ten from 203.0.113.1 answer 401 (each from the
		// address's own bucket: the address limit is high enough here
		// through a fresh server), then the address is refused.
		env2 := apitest.New(t, db, apitest.Options{RegistrationsPerAddress: 1000,
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
		key2 := installKey(t, env2)
		guess := func(from, k string) int {
			return env2.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register",
				Body: registerBody(k, agentFacts("G", "")), Header: http.Header{"X-Forwarded-For": {from}}}).Status
		}
		for i := range 10 {
			if st := guess("203.0.113.1", fmt.Sprintf("wrong-%d", i)); st != http.StatusUnauthorized {
				t.Fatalf("wrong key %d: %d", i+1, st)
			}
		}
		if st := guess("203.0.113.1", key2); st != http.StatusTooManyRequests {
			t.Fatalf("after ten wrong keys, the right one from the same address: %d, want 429", st)
		}
		if st := guess("203.0.113.2", key2); st != http.StatusCreated {
			t.Fatalf("another address: %d", st)
		}
		// Without a trusted proxy, X-Forwarded-For names nobody: the peer
		// (127.0.0.1) is the client.
		env3 := apitest.New(t, db, apitest.Options{RegistrationsPerAddress: 2})
		key3 := installKey(t, env3)
		for i := range 3 {
			resp := env3.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register",
				Body:   registerBody(key3, agentFacts(fmt.Sprintf("X%d", i), fmt.Sprintf("X%d", i))),
				Header: http.Header{"X-Forwarded-For": {fmt.Sprintf("192.0.2.%d", i+1)}}})
			if want := map[bool]int{true: http.StatusCreated, false: http.StatusTooManyRequests}[i < 2]; resp.Status != want {
				t.Fatalf("untrusted X-Forwarded-For, registration %d: %d, want %d", i+1, resp.Status, want)
			}
		}
	})
}

// IAM_MAX_DEVICES_PER_ORG: a registration past the cap answers 409 Device
// Limit Reached.
func TestAgent_DeviceCap(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{MaxDevicesPerOrg: 2})
		key := installKey(t, env)
		registerAgent(t, env, key, agentFacts("A", "SA"))
		b := registerAgent(t, env, key, agentFacts("B", "SB"))
		resp := env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register", Body: registerBody(key, agentFacts("C", "SC"))})
		if resp.Status != http.StatusConflict || resp.ErrorBody(t).Title != "Device Limit Reached" {
			t.Fatalf("past the cap: %d %s", resp.Status, resp.Body)
		}
		// The agent registering again with its credential adds no device.
		resp = env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register", Body: registerBody(key, b.facts),
			Header: http.Header{"Authorization": {"Device " + b.id + ":" + b.secret}}})
		if resp.Status != http.StatusCreated {
			t.Fatalf("re-registration at the cap: %d %s", resp.Status, resp.Body)
		}
	})
}

type deviceListing struct {
	Data []struct {
		ID                  string  `json:"id"`
		PossibleDuplicateOf *string `json:"possible_duplicate_of"`
	} `json:"data"`
}

// A registration with a live device's serial number and no credential
// leaves that device working (its credential checks in, its pending
// commands still reach it) and makes a new device flagged as its possible
// duplicate, in the list and the detail; deleting either clears the flag.
// The agent's own re-registration, with its credential, keeps its device.
func TestAgent_RegisterDuplicate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		ctx := t.Context()
		key := installKey(t, env)
		u := &identity.User{OrgID: env.Org.ID, Email: "alice@example.com", Status: identity.UserActive}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		victim := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		victim.checkin(map[string]any{"local_accounts": localAccounts("alice")})
		vid, _ := models.ParseID("id", victim.id)
		accs, _ := env.Store.Devices.Accounts(ctx, env.Org.ID, vid)
		if _, err := env.Store.Devices.Link(ctx, env.Org.ID, vid, accs[0].ID, devices.LinkRequest{UserID: u.ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}

		impostor := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		if impostor.id == victim.id {
			t.Fatal("a registration with the victim's serial number took the victim's device over")
		}
		ans := victim.checkin(map[string]any{"local_accounts": localAccounts("alice")})
		if len(ans.Commands) != 1 || ans.Commands[0]["type"] != "link" {
			t.Fatalf("the victim's commands: %+v", ans.Commands)
		}
		if ans := impostor.checkin(nil); len(ans.Commands) != 0 {
			t.Fatalf("the duplicate got %+v", ans.Commands)
		}
		read := env.Token(env.Org, "svc.device.READ")
		var list deviceListing
		env.Get("/api/v1/devices", read).JSON(t, &list)
		flags := map[string]*string{}
		for _, d := range list.Data {
			flags[d.ID] = d.PossibleDuplicateOf
		}
		if len(flags) != 2 || flags[victim.id] != nil || flags[impostor.id] == nil || *flags[impostor.id] != victim.id {
			t.Fatalf("list flags %v", flags)
		}
		var one struct {
			PossibleDuplicateOf *string `json:"possible_duplicate_of"`
		}
		env.Get("/api/v1/devices/"+impostor.id, read).JSON(t, &one)
		if one.PossibleDuplicateOf == nil || *one.PossibleDuplicateOf != victim.id {
			t.Fatalf("detail flag %v", one.PossibleDuplicateOf)
		}

		// The victim's agent registering again proves its credential: the
		// same device, a new secret.
		resp := env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register", Body: registerBody(key, victim.facts),
			Header: http.Header{"Authorization": {"Device " + victim.id + ":" + victim.secret}}})
		var out struct {
			DeviceID     string `json:"device_id"`
			DeviceSecret string `json:"device_secret"`
		}
		resp.JSON(t, &out)
		if resp.Status != http.StatusCreated || out.DeviceID != victim.id {
			t.Fatalf("re-registration with the credential: %d %s", resp.Status, resp.Body)
		}
		victim.secret = out.DeviceSecret
		// A wrong credential is refused, not ignored.
		resp = env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register", Body: registerBody(key, victim.facts),
			Header: http.Header{"Authorization": {"Device " + victim.id + ":wrong"}}})
		if resp.Status != http.StatusUnauthorized {
			t.Fatalf("wrong credential: %d %s", resp.Status, resp.Body)
		}

		// The admin resolves it by deleting one of them.
		del := env.Token(env.Org, "svc.device.DELETE")
		if resp := env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/devices/" + victim.id, Token: del}); resp.Status != http.StatusOK {
			t.Fatalf("delete: %d %s", resp.Status, resp.Body)
		}
		env.Get("/api/v1/devices/"+impostor.id, read).JSON(t, &one)
		if one.PossibleDuplicateOf != nil {
			t.Fatalf("flag after deleting the other: %v", *one.PossibleDuplicateOf)
		}
	})
}

// A deleted device is never resurrected (ADJoined: it stays inactive;
// SvcJoined: it stays 404): a later registration with its serial number
// is a new device. Its credential serves only to fetch and acknowledge the
// uninstall: authorize (by user id or email) and register answer 401, the
// check-in is never refused for its body.
func TestAgent_DeletedDevice(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		ctx := t.Context()
		key := installKey(t, env)
		u := &identity.User{OrgID: env.Org.ID, Email: "bob@example.com", Status: identity.UserActive}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		read := env.Token(env.Org, "svc.device.READ")
		del := env.Token(env.Org, "svc.device.DELETE")
		for _, join := range []string{"ADJoined", "SvcJoined"} {
			facts := agentFacts("PC-"+join, "S-"+join)
			facts["join_type"] = join
			a := registerAgent(t, env, key, facts)
			a.checkin(nil)
			auth := http.Header{"Authorization": {"Device " + a.id + ":" + a.secret}}
			for _, who := range []map[string]any{{"user_id": models.FormatID(u.ID)}, {"user_name": u.Email}} {
				body := map[string]any{"action": "RDP", "ip": "198.51.100.7"}
				for k, v := range who {
					body[k] = v
				}
				if resp := env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/authorize", Body: body, Header: auth}); resp.Status != http.StatusOK {
					t.Fatalf("%s: authorize before delete: %d %s", join, resp.Status, resp.Body)
				}
			}
			if resp := env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/devices/" + a.id, Token: del}); resp.Status != http.StatusOK {
				t.Fatalf("%s: delete: %d %s", join, resp.Status, resp.Body)
			}
			for _, who := range []map[string]any{{"user_id": models.FormatID(u.ID)}, {"user_name": u.Email}} {
				body := map[string]any{"action": "RDP", "ip": "198.51.100.7"}
				for k, v := range who {
					body[k] = v
				}
				if resp := env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/authorize", Body: body, Header: auth}); resp.Status != http.StatusUnauthorized {
					t.Fatalf("%s: authorize %v after delete: %d %s, want 401", join, who, resp.Status, resp.Body)
				}
			}
			if resp := env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register", Body: registerBody(key, facts), Header: auth}); resp.Status != http.StatusUnauthorized {
				t.Fatalf("%s: register with the deleted credential: %d %s, want 401", join, resp.Status, resp.Body)
			}
			// The same machine registering anew is a new device.
			again := registerAgent(t, env, key, facts)
			if again.id == a.id {
				t.Fatalf("%s: the deleted device came back", join)
			}
			resp := env.Get("/api/v1/devices/"+a.id, read)
			if join == "SvcJoined" && resp.Status != http.StatusNotFound {
				t.Fatalf("%s: deleted device %d %s", join, resp.Status, resp.Body)
			}
			if join == "ADJoined" {
				var d struct {
					AgentStatus         string  `json:"agent_status"`
					PossibleDuplicateOf *string `json:"possible_duplicate_of"`
				}
				resp.JSON(t, &d)
				if resp.Status != http.StatusOK || d.AgentStatus != "inactive" {
					t.Fatalf("%s: deleted device %d %s", join, resp.Status, resp.Body)
				}
			}
			// The check-in fetches the uninstall whatever the body says:
			// {} and a body that is not even JSON.
			var uninstall string
			for _, body := range []any{map[string]any{}, "not json"} {
				resp = env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/checkin", Body: body, Header: auth})
				var ans checkinAnswer
				resp.JSON(t, &ans)
				if resp.Status != http.StatusOK || len(ans.Commands) != 1 || ans.Commands[0]["type"] != "uninstall" {
					t.Fatalf("%s: uninstalling check-in with %v: %d %s", join, body, resp.Status, resp.Body)
				}
				uninstall = ans.Commands[0]["id"].(string)
			}
			// An ack beside rubbish (and an ack that cannot be applied) is
			// applied: the credential is revoked.
			resp = env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/checkin", Header: auth, Body: map[string]any{
				"facts": "rubbish", "local_accounts": 7,
				"acks": []any{map[string]any{"command_id": "x", "status": "maybe"},
					map[string]any{"command_id": uninstall, "status": "done", "message": "bye\u0000 now"}}}})
			if resp.Status != http.StatusOK {
				t.Fatalf("%s: the uninstall's ack: %d %s", join, resp.Status, resp.Body)
			}
			if resp := a.checkinRaw(map[string]any{}, ""); resp.Status != http.StatusUnauthorized {
				t.Fatalf("%s: check-in after the ack: %d %s", join, resp.Status, resp.Body)
			}
		}
	})
}
