package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/api/auth"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/management"
)

type mgmtResults struct {
	Data []struct {
		User struct {
			ID    string `json:"id"`
			Email string `json:"email"`
		} `json:"user"`
		Status  string `json:"status"`
		Message string `json:"message"`
		Attempt int    `json:"attempt"`
	} `json:"data"`
	Meta struct {
		Total int `json:"total_no_of_objects"`
	} `json:"meta"`
}

// waitExecution polls an execution's status until it has finished.
func waitExecution(t *testing.T, env *apitest.Env, tok, path string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var st struct{ Data string }
		env.Get(path+"/status", tok).JSON(t, &st)
		if management.ExecutionStatus(st.Data).Finished() {
			return st.Data
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %s after a minute", path, st.Data)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func execute(t *testing.T, env *apitest.Env, tok, action string, body map[string]any) (string, mgmtAccepted) {
	t.Helper()
	resp := env.Do(apitest.Request{Method: "POST", Path: mgmtBase + action + "/execute", Token: tok, Body: body})
	if resp.Status != http.StatusAccepted {
		t.Fatalf("execute: %d %s", resp.Status, resp.Body)
	}
	var acc mgmtAccepted
	resp.JSON(t, &acc)
	return mgmtBase + action + "/executions/" + fmt.Sprint(acc.Data.ExecutionID), acc
}

// TestManagement_DeleteRunsAndRetries runs a delete through the real
// workflow: the caller, the last active administrator and a missing user
// fail with their messages, the others are deleted with their memberships;
// after a second administrator appears, a retry re-runs exactly the three
// failed users as attempt 2, the administrator now succeeding; earlier
// results stay listable.
func TestManagement_DeleteRunsAndRetries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		ctx := t.Context()
		mk := func(email string, role identity.Role) *identity.User {
			u := &identity.User{OrgID: env.Org.ID, Email: email, FirstName: email[:2], Status: 1, Role: role}
			if err := env.Store.Users.Create(ctx, u, ""); err != nil {
				t.Fatal(err)
			}
			return u
		}
		admin := mk("ad@example.com", identity.RoleAdmin)
		caller := mk("me@example.com", identity.RoleUser)
		var plain []*identity.User
		for i := range 3 {
			plain = append(plain, mk(fmt.Sprintf("u%d@example.com", i), identity.RoleUser))
		}
		g := &identity.Group{OrgID: env.Org.ID, Name: "g"}
		if err := env.Store.Groups.Create(ctx, g, []int64{plain[0].ID, caller.ID}, nil); err != nil {
			t.Fatal(err)
		}
		tok := env.Tokens.Mint(auth.Principal{UserID: caller.ID, OrgID: env.Org.ID, Scopes: []string{"svc.management.all"}})
		ids := []string{models.FormatID(plain[0].ID), models.FormatID(caller.ID), "999", models.FormatID(admin.ID),
			models.FormatID(plain[1].ID), models.FormatID(plain[2].ID)}
		path, acc := execute(t, env, tok, "delete-users", map[string]any{"user_ids": ids})
		if got := waitExecution(t, env, tok, path); got != "completed_with_errors" {
			t.Fatalf("status %s", got)
		}
		var res mgmtResults
		env.Get(path+"/data", tok).JSON(t, &res)
		want := []struct{ status, msg string }{
			{"success", "deleted"}, {"failure", "yourself"}, {"failure", "not found"},
			{"failure", "last active administrator"}, {"success", "deleted"}, {"success", "deleted"},
		}
		if len(res.Data) != len(want) || res.Meta.Total != 6 {
			t.Fatalf("results = %+v", res)
		}
		for i, w := range want {
			r := res.Data[i]
			if r.User.ID != ids[i] || r.Status != w.status || !strings.Contains(r.Message, w.msg) || r.Attempt != 1 {
				t.Errorf("result %d = %+v, want %s %q", i, r, w.status, w.msg)
			}
		}
		for _, u := range plain {
			if _, err := env.Store.Users.Get(ctx, env.Org.ID, u.ID); models.ErrorCode(err) != models.ENOTFOUND {
				t.Errorf("%s not deleted: %v", u.Email, err)
			}
		}
		if got, _ := env.Store.Groups.Get(ctx, env.Org.ID, g.ID); got.MembersCount != 1 {
			t.Errorf("group has %d members, want the caller alone", got.MembersCount)
		}
		job, err := env.Store.Jobs.Get(ctx, env.Org.ID, mustID(t, acc.Data.JobID))
		if err != nil || job.Status != jobs.JobWarning || job.Module != "Management" || job.SuccessCount != 3 || job.ErrorCount != 3 {
			t.Errorf("job = %+v, %v", job, err)
		}
		var exec struct {
			Data struct {
				SuccessCount int64 `json:"success_count"`
				FailedCount  int64 `json:"failed_count"`
			} `json:"data"`
		}
		env.Get(path, tok).JSON(t, &exec)
		if exec.Data.SuccessCount != 3 || exec.Data.FailedCount != 3 {
			t.Errorf("execution counts = %+v", exec.Data)
		}

		// Another administrator: the first may now go.
		mk("ad2@example.com", identity.RoleAdmin)
		resp := env.Do(apitest.Request{Method: "POST", Path: path + "/retry", Token: tok})
		if resp.Status != http.StatusAccepted {
			t.Fatalf("retry: %d %s", resp.Status, resp.Body)
		}
		resp.JSON(t, &acc)
		if acc.Data.Attempt != 2 {
			t.Errorf("retry = %s", resp.Body)
		}
		if got := waitExecution(t, env, tok, path); got != "completed_with_errors" {
			t.Fatalf("status after retry %s", got)
		}
		env.Get(path+"/data", tok).JSON(t, &res)
		var rerun []string
		for _, r := range res.Data {
			rerun = append(rerun, r.User.ID+" "+r.Status)
		}
		if !slices.Equal(rerun, []string{ids[1] + " failure", "999 failure", ids[3] + " success"}) {
			t.Errorf("attempt 2 = %v, want exactly the three failed users", rerun)
		}
		env.Get(path+"/data?attempt=1&filter="+url.QueryEscape(`status eq "failure"`), tok).JSON(t, &res)
		if len(res.Data) != 3 {
			t.Errorf("attempt 1 keeps its %d failures, want 3", len(res.Data))
		}
		env.Get(path, tok).JSON(t, &exec)
		if exec.Data.SuccessCount != 4 || exec.Data.FailedCount != 2 {
			t.Errorf("execution counts after retry = %+v", exec.Data)
		}
	})
}

// TestManagement_MoveCompletesAndRetryIsRefused moves users from an
// upload: every one succeeds, so a retry is 409.
func TestManagement_MoveCompletesAndRetryIsRefused(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		ctx := t.Context()
		var users []*identity.User
		for i := range 3 {
			u := &identity.User{OrgID: env.Org.ID, Email: fmt.Sprintf("m%d@example.com", i), Status: 1}
			if err := env.Store.Users.Create(ctx, u, ""); err != nil {
				t.Fatal(err)
			}
			users = append(users, u)
		}
		tok := env.Token(env.Org, "svc.management.all")
		body, h := csvUpload(t, []byte("Primary Email\nm0@example.com\nM2@example.com\n"), "", false)
		resp := env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "move-users/uploads", Token: tok, Body: body, Header: h})
		var up mgmtUploadBody
		resp.JSON(t, &up)
		path, _ := execute(t, env, tok, "move-user", map[string]any{"upload_id": fmt.Sprint(up.Data.ID), "target_container": `OU=R\2CD,DC=example`})
		if got := waitExecution(t, env, tok, path); got != "completed" {
			t.Fatalf("status %s", got)
		}
		for i, want := range []string{`OU=R\2CD,DC=example`, "", `OU=R\2CD,DC=example`} {
			got, _ := env.Store.Users.Get(ctx, env.Org.ID, users[i].ID)
			if got.Container != want {
				t.Errorf("user %d container %q, want %q", i, got.Container, want)
			}
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: path + "/retry", Token: tok}), 409, "00000105", "nothing to retry")
	})
}
