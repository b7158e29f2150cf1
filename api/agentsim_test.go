package api_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/client/agentsim"
	"iam/models"
	"iam/models/dbtest"
)

func installKey(t *testing.T, env *apitest.Env) string {
	t.Helper()
	resp := env.Get("/api/v1/protection/agents-info", env.Token(env.Org, "svc.conditional_access_policy.READ"))
	var info struct {
		Data []struct {
			InstallationKey string `json:"installation_key"`
		} `json:"data"`
	}
	resp.JSON(t, &info)
	if resp.Status != 200 || len(info.Data) == 0 {
		t.Fatalf("agents-info %d %s", resp.Status, resp.Body)
	}
	return info.Data[0].InstallationKey
}

// End to end with the simulator: register, report accounts, an admin links
// one, the next check-in carries the command, the ack makes it linked,
// unlink, delete the device, the agent receives uninstall and is then
// refused.
func TestAgentSim_EndToEnd(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		ctx := t.Context()
		tok := env.Token(env.Org, "svc.device.ALL")
		agent := agentsim.NewAgents(agentsim.Config{BaseURL: env.URL, Devices: 1, Accounts: 3, Prefix: "e2e"})[0]
		if err := agent.Register(ctx, installKey(t, env), "windows"); err != nil {
			t.Fatal(err)
		}
		checkIn := func() *agentsim.Answer {
			t.Helper()
			ans, err := agent.CheckIn(ctx)
			if err != nil {
				t.Fatalf("check-in: %v", err)
			}
			return ans
		}
		checkIn()
		accs := deviceAccounts(t, env, tok, agent.ID)
		if len(accs) != 3 {
			t.Fatalf("accounts %v", accs)
		}
		user := createUser(t, env, env.Token(env.Org, "svc.user.ALL"), map[string]any{"firstName": "U", "email": "u@example.com"})
		path := "/api/v1/devices/" + agent.ID + "/accounts/" + models.FormatID(accs["user1"].ID)
		if resp := env.Do(apitest.Request{Method: "POST", Path: path + "/link", Token: tok,
			Body: map[string]any{"permission_level": "Standard", "idp_user_id": user.ID}}); resp.Status != 200 {
			t.Fatalf("link %d %s", resp.Status, resp.Body)
		}
		if ans := checkIn(); len(ans.Commands) != 1 || ans.Commands[0]["type"] != "link" || agent.Linked["user1"] != user.ID {
			t.Fatalf("link command %+v, device links %v", ans.Commands, agent.Linked)
		}
		checkIn() // the ack
		if a := deviceAccounts(t, env, tok, agent.ID)["user1"]; a.LinkStatus != "linked" {
			t.Fatalf("after the ack: %+v", a)
		}
		if resp := env.Do(apitest.Request{Method: "POST", Path: path + "/unlink", Token: tok}); resp.Status != 200 {
			t.Fatalf("unlink %d %s", resp.Status, resp.Body)
		}
		if ans := checkIn(); len(ans.Commands) != 1 || ans.Commands[0]["type"] != "unlink" || agent.Linked["user1"] != "" {
			t.Fatalf("unlink command %+v", ans.Commands)
		}
		checkIn()
		if resp := env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/devices/" + agent.ID, Token: tok}); resp.Status != 200 {
			t.Fatalf("delete %d %s", resp.Status, resp.Body)
		}
		if ans := checkIn(); len(ans.Commands) != 1 || ans.Commands[0]["type"] != "uninstall" || !agent.Uninstalled {
			t.Fatalf("uninstall command %+v", ans.Commands)
		}
		checkIn() // the ack
		if _, err := agent.CheckIn(ctx); !errors.Is(err, agentsim.ErrRefused) {
			t.Fatalf("after the uninstall: %v, want refused", err)
		}
	})
}

// Run plays several agents for a few rounds.
func TestAgentSim_Run(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	st, err := agentsim.Run(t.Context(), agentsim.Config{BaseURL: env.URL, Key: installKey(t, env), Devices: 5, Accounts: 4,
		Interval: 30 * time.Millisecond, Rounds: 3})
	if err != nil {
		t.Fatal(err)
	}
	if st.Registered != 5 || st.CheckIns != 15 || st.Errors != 0 || st.Percentile(99) <= 0 {
		t.Fatalf("stats %+v", st)
	}
	resp := env.Get("/api/v1/devices?filter=agent_status%20eq%20%22active%22", env.Token(env.Org, "svc.device.READ"))
	if !strings.Contains(string(resp.Body), `"total_no_of_objects":5`) || !strings.Contains(string(resp.Body), `"total_local_accounts":4`) {
		t.Fatalf("devices %s", resp.Body)
	}
}
