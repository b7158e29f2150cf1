package api_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/identity"
	"iam/models/jobs"
)

type syncAccepted struct {
	Data struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"data"`
	Links struct {
		Status struct {
			Href string `json:"href"`
		} `json:"status"`
	} `json:"links"`
}

func syncNow(t *testing.T, env *apitest.Env, tok string) syncAccepted {
	t.Helper()
	resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/device-account-linking/sync-now", Token: tok})
	if resp.Status != http.StatusAccepted {
		t.Fatalf("sync-now: %d %s", resp.Status, resp.Body)
	}
	var out syncAccepted
	resp.JSON(t, &out)
	if out.Data.ID == "" || out.Links.Status.Href != "/jobs/"+out.Data.ID {
		t.Fatalf("sync-now answered %s", resp.Body)
	}
	return out
}

func enableLinking(t *testing.T, env *apitest.Env, tok string) {
	t.Helper()
	resp := env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/device-account-linking", Token: tok, Body: map[string]any{"is_enabled": true}})
	if resp.Status != http.StatusOK {
		t.Fatalf("enable linking: %d %s", resp.Status, resp.Body)
	}
}

// A sync through the API and a real workflow: the matching account gets an
// Automatic link whose command reaches the agent, whose ack makes it
// linked; the others are skipped with their reason in the job's results.
func TestSyncNow_EndToEnd(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	ctx := context.Background()
	tok := env.Token(env.Org, "svc.device.ALL")
	jobsTok := env.Token(env.Org, "svc.job.READ")
	for _, email := range []string{"alice@example.com", "bob@example.com", "bob@example.org"} {
		if err := env.Store.Users.Create(ctx, &identity.User{OrgID: env.Org.ID, Email: email, Status: identity.UserActive}, ""); err != nil {
			t.Fatal(err)
		}
	}
	key, err := env.Store.Devices.InstallKey(ctx, env.Org.ID, devices.AgentDevice)
	if err != nil {
		t.Fatal(err)
	}
	a := registerAgent(t, env, key, agentFacts("PC1", "S1"))
	a.checkin(map[string]any{"local_accounts": localAccounts("alice", "Administrator", "ghost", "bob")})

	resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/device-account-linking/sync-now", Token: tok})
	if resp.Status != http.StatusConflict || resp.ErrorBody(t).Title != "Account Linking Disabled" {
		t.Fatalf("sync-now while linking is off: %d %s", resp.Status, resp.Body)
	}
	enableLinking(t, env, tok)
	acc := syncNow(t, env, tok)
	id, _ := models.ParseID("id", acc.Data.ID)
	job := env.WaitJob(env.Org, id, time.Minute, finished)
	if job.Status != jobs.JobCompleted || job.Module != "Devices" || job.Processed != 4 || job.SuccessCount != 1 {
		t.Fatalf("job %+v", job)
	}
	if err := env.Temporal.GetWorkflow(ctx, job.WorkflowID(), "").Get(ctx, nil); err != nil {
		t.Fatalf("workflow %s: %v", job.WorkflowID(), err)
	}
	resp = env.Get("/api/v1/jobs/"+acc.Data.ID+"/results", jobsTok)
	var results struct {
		Data []struct {
			ID, Status, Message string
		}
	}
	resp.JSON(t, &results)
	accounts := deviceAccounts(t, env, tok, a.id)
	byAccount := map[string]string{}
	for _, r := range results.Data {
		byAccount[r.ID] = r.Status + ": " + r.Message
	}
	for name, want := range map[string]string{
		"alice": "SUCCESS: linked to user", "Administrator": `SKIPPED: skipped: "Administrator" is restricted`,
		"ghost": `SKIPPED: skipped: no user matches "ghost"`, "bob": `SKIPPED: skipped: 2 users match "bob"`,
	} {
		got := byAccount[models.FormatID(accounts[name].ID)]
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s: result %q, want %q…", name, got, want)
		}
	}
	if al := accounts["alice"]; al.LinkStatus != devices.LinkPending || al.IdpUserDetails == nil || al.IdpUserDetails.LinkType != "Automatic" {
		t.Fatalf("alice after the sync: %+v", al)
	}

	// The agent gets the command; its ack makes the link.
	ans := a.checkin(map[string]any{"local_accounts": localAccounts("alice", "Administrator", "ghost", "bob")})
	if len(ans.Commands) != 1 || ans.Commands[0]["type"] != "link" || ans.Commands[0]["user_name"] != "alice" {
		t.Fatalf("commands %v", ans.Commands)
	}
	a.checkin(map[string]any{"local_accounts": localAccounts("alice", "Administrator", "ghost", "bob"),
		"acks": []map[string]any{{"command_id": ans.Commands[0]["id"], "status": "done"}}})
	if al := deviceAccounts(t, env, tok, a.id)["alice"]; al.LinkStatus != devices.LinkLinked {
		t.Fatalf("alice after the ack: %+v", al)
	}
	resp = env.Get(`/api/v1/device-account-linking/history?filter=job_id%20eq%20"`+acc.Data.ID+`"`, tok)
	var hist struct {
		Data []struct {
			Actor    string `json:"actor"`
			LinkType string `json:"link_type"`
			UserName string `json:"user_name"`
			NewState string `json:"new_state"`
		}
	}
	resp.JSON(t, &hist)
	if len(hist.Data) != 1 || hist.Data[0].Actor != "sync" || hist.Data[0].LinkType != "Automatic" || hist.Data[0].UserName != "alice" {
		t.Fatalf("history of the sync: %s", resp.Body)
	}
	// Another sync finds nothing left to link.
	acc2 := syncNow(t, env, tok)
	if acc2.Data.ID == acc.Data.ID {
		t.Fatal("a finished sync was answered again")
	}
	id2, _ := models.ParseID("id", acc2.Data.ID)
	if j := env.WaitJob(env.Org, id2, time.Minute, finished); j.Processed != 3 || j.SuccessCount != 0 || j.Status != jobs.JobCompleted {
		t.Fatalf("second sync %+v", j)
	}
}

// While a sync is queued, sync-now answers with it: concurrent requests
// make one job.
func TestSyncNow_OneJobAtATime(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.device.WRITE")
		enableLinking(t, env, tok)
		ids := make([]string, 6)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/device-account-linking/sync-now", Token: tok})
				var out syncAccepted
				resp.JSON(t, &out)
				if resp.Status != http.StatusAccepted || out.Data.Status != "QUEUED" {
					t.Errorf("sync-now: %d %s", resp.Status, resp.Body)
				}
				ids[i] = out.Data.ID
			})
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("concurrent sync-now answered jobs %v, want one", ids)
			}
		}
		n, err := db.NewSelect().Table("jobs").Where("org_id = ? AND module = ?", env.Org.ID, "Devices").Count(context.Background())
		if err != nil || n != 1 {
			t.Fatalf("%d Devices jobs (%v), want 1", n, err)
		}
		// Another organization has its own.
		other := env.NewOrg("Other")
		otok := env.Token(other, "svc.device.ALL")
		enableLinking(t, env, otok)
		if got := syncNow(t, env, otok); got.Data.ID == ids[0] {
			t.Fatal("another organization was answered this one's sync")
		}
	})
}
