package api_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/workflows"
)

// An execution that passes its deadline (the worker's
// IAM_MGMT_EXECUTION_TIMEOUT) ends time_out through the API: the chunk in
// flight finishes, the users after it are not processed (they still exist
// and have no result), they count as failed, the job ends WARNING; a retry
// re-runs exactly the users not reached, under a deadline of its own, and
// completes.
//
// The first batch is held back by a transaction of the test that locks the
// organization's active administrator (every batch locks the active
// administrators), until the deadline has passed: the first chunk (10,000
// users) then runs to its end, and the check before the next chunk ends the
// attempt.
func TestManagement_ExecutionTimesOut(t *testing.T) {
	const chunk = workflows.MgmtBatchSize * workflows.MgmtBatchesPerChunk
	const users, timeout = chunk + 1000, 4 * time.Second
	db := dbtest.Postgres(t)
	env := apitest.New(t, db, apitest.Options{Temporal: true, MgmtExecutionTimeout: timeout})
	ctx := t.Context()
	ids := seedUsers(t, db, env.Org, users)
	admin := &identity.User{OrgID: env.Org.ID, Email: "admin@corp.test", Status: identity.UserActive, Role: identity.RoleAdmin}
	if err := env.Store.Users.Create(ctx, admin, ""); err != nil {
		t.Fatal(err)
	}
	tok := env.Token(env.Org, "svc.management.all")

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			t.Error(rerr)
		}
	}()
	if _, err = tx.ExecContext(ctx, "SELECT id FROM users WHERE id = ? FOR UPDATE", admin.ID); err != nil {
		t.Fatal(err)
	}
	path, acc := execute(t, env, tok, "delete-users", map[string]any{"filter": `email ew "@example.com"`})
	var exec struct {
		Data struct {
			Status    string    `json:"status"`
			CreatedAt time.Time `json:"created_at"`
		} `json:"data"`
	}
	for began := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		env.Get(path, tok).JSON(t, &exec)
		if exec.Data.Status == "pending" {
			break
		}
		if time.Since(began) > 30*time.Second {
			t.Fatalf("execution still %s", exec.Data.Status)
		}
	}
	time.Sleep(time.Until(exec.Data.CreatedAt.Add(timeout + 200*time.Millisecond)))
	if err = tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	if got := waitExecution(t, env, tok, path); got != "time_out" {
		t.Fatalf("status %s, want time_out", got)
	}
	var got struct {
		Data struct {
			Status       string     `json:"status"`
			Attempt      int        `json:"attempt"`
			Total        int64      `json:"total"`
			SuccessCount int64      `json:"success_count"`
			FailedCount  int64      `json:"failed_count"`
			FinishedAt   *time.Time `json:"finished_at"`
			Attempts     []struct {
				Status string `json:"status"`
				Total  int64  `json:"total"`
			} `json:"attempts"`
		} `json:"data"`
	}
	env.Get(path, tok).JSON(t, &got)
	if d := got.Data; d.Total != users || d.SuccessCount != chunk || d.FailedCount != users-chunk || d.FinishedAt == nil {
		t.Errorf("execution %+v: want %d of %d succeeded, the %d not reached failed", d, chunk, users, users-chunk)
	}
	var results mgmtResults
	env.Get(path+"/data?limit=1", tok).JSON(t, &results)
	if results.Meta.Total != chunk {
		t.Errorf("%d results, want %d (the users not reached have none)", results.Meta.Total, chunk)
	}
	left, err := db.NewSelect().Table("users").Where("org_id = ? AND email LIKE '%@example.com'", env.Org.ID).Count(ctx)
	if err != nil || left != users-chunk {
		t.Errorf("%d users left (%v), want the %d not reached", left, err, users-chunk)
	}
	for i := chunk + 1; i <= users; i += 333 { // the last 1,000 in seq (id) order are the ones left
		if _, err := env.Store.Users.Get(ctx, env.Org.ID, ids[i]); err != nil {
			t.Errorf("user %d: %v, want it left", i, err)
		}
	}
	job := env.WaitJob(env.Org, mustID(t, acc.Data.JobID), time.Minute, finished)
	if job.Status != jobs.JobWarning || job.Processed != users || job.ErrorCount != users-chunk {
		t.Errorf("job %s processed %d errors %d, want WARNING, %d, %d", job.Status, job.Processed, job.ErrorCount, users, users-chunk)
	}

	retry := env.Do(apitest.Request{Method: "POST", Path: path + "/retry", Token: tok})
	if retry.Status != 202 {
		t.Fatalf("retry: %d %s", retry.Status, retry.Body)
	}
	if got := waitExecution(t, env, tok, path); got != "completed" {
		t.Fatalf("retry ended %s, want completed", got)
	}
	env.Get(path, tok).JSON(t, &got)
	if d := got.Data; d.Attempt != 2 || d.SuccessCount != users || d.FailedCount != 0 || len(d.Attempts) != 2 ||
		d.Attempts[1].Total != users-chunk || d.Attempts[0].Status != "time_out" {
		t.Errorf("after the retry %+v", d)
	}
	if left, _ := db.NewSelect().Table("users").Where("org_id = ? AND email LIKE '%@example.com'", env.Org.ID).Count(ctx); left != 0 {
		t.Errorf("%d users left after the retry", left)
	}
}
