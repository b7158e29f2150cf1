package api_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"iam/models/identity"
	"iam/models/jobs"
)

// A 100,000-user delete whose worker is SIGKILLed three times still
// completes: every user deleted exactly once, the per-user results complete
// and identical (status and message, seq by seq) to an undisturbed run on
// another organization. The first two kills come from the worker itself
// right after a batch's commit and before its activity completes (the
// test-only hook), so Temporal retries a batch already applied; the third
// from outside while a chunk is in flight.
func TestManagement_WorkerKilledThreeTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("long fault test")
	}
	const users = 100_000
	ctx := context.Background()
	f := newFaultEnv(t, "mgmt-fault")
	env, db, tc := f.Env, f.DB, f.Temporal

	disturbed, undisturbed := env.Org, env.NewBareOrg("Reference")
	seedUsers(t, db, disturbed, users)
	seedUsers(t, db, undisturbed, users)
	run := func(org *identity.Organization) (string, int64) {
		tok := env.Token(org, "svc.management.all")
		path, acc := execute(t, env, tok, "delete-users", map[string]any{"filter": `email ew "@example.com"`})
		return path, mustID(t, acc.Data.JobID)
	}

	began := time.Now()
	pathA, jobA := run(disturbed)
	f.killSelfAfterCommits(t, 2, 7, began, func() string {
		j, _ := env.Store.Jobs.Get(ctx, disturbed.ID, jobA)
		return fmt.Sprintf("%d users processed", j.Processed)
	})
	w := f.startWorker(t)
	env.WaitJob(disturbed, jobA, 3*time.Minute, func(j *jobs.Job) bool { return j.Processed >= 40_000 })
	if err := w.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w.Wait()
	t.Logf("killed the worker from outside (%s)", time.Since(began).Round(time.Millisecond))
	f.startWorker(t) // runs to the end; the test's cleanup stops it
	a := env.WaitJob(disturbed, jobA, 5*time.Minute, finished)
	t.Logf("disturbed delete ended %s in %s", a.Status, time.Since(began).Round(time.Millisecond))

	began = time.Now()
	pathB, jobB := run(undisturbed)
	b := env.WaitJob(undisturbed, jobB, 5*time.Minute, finished)
	t.Logf("undisturbed delete ended %s in %s", b.Status, time.Since(began).Round(time.Millisecond))

	for _, c := range []struct {
		org  *identity.Organization
		path string
		job  *jobs.Job
	}{{disturbed, pathA, a}, {undisturbed, pathB, b}} {
		if c.job.Status != jobs.JobCompleted || c.job.Processed != users || c.job.SuccessCount != users {
			t.Fatalf("job %d: %s %d processed, %d ok", c.job.ID, c.job.Status, c.job.Processed, c.job.SuccessCount)
		}
		if n, _ := env.Store.Users.CountUsers(ctx, c.org.ID); n != 0 {
			t.Errorf("%d users left in %s", n, c.org.Name)
		}
		tok := env.Token(c.org, "svc.management.read")
		if got := waitExecution(t, env, tok, c.path); got != "completed" {
			t.Errorf("%s: execution %s", c.org.Name, got)
		}
	}
	// Exactly one result per user, all success, in both runs alike.
	count := func(org *identity.Organization, job *jobs.Job) (rows, distinct int) {
		exec, _, err := env.Store.Management.ExecutionByJob(ctx, org.ID, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := db.NewSelect().Table("mgmt_execution_results").Where("execution_id = ? AND status = 'success' AND message = 'deleted'", exec.ID).Count(ctx)
		var d int
		if err := db.NewSelect().Table("mgmt_execution_results").ColumnExpr("COUNT(DISTINCT user_id)").Where("execution_id = ?", exec.ID).Scan(ctx, &d); err != nil {
			t.Fatal(err)
		}
		return int(r), d
	}
	for _, c := range []struct {
		org *identity.Organization
		job *jobs.Job
	}{{disturbed, a}, {undisturbed, b}} {
		if r, d := count(c.org, c.job); r != users || d != users {
			t.Errorf("%s: %d success results over %d distinct users, want %d each", c.org.Name, r, d, users)
		}
	}
	ra, rb := allResults(t, env, jobA), allResults(t, env, jobB)
	if len(ra) != users || len(rb) != users {
		t.Fatalf("%d and %d job results, want %d each", len(ra), len(rb), users)
	}
	for i := range ra {
		if ra[i].Seq != int64(i+1) || ra[i].Seq != rb[i].Seq || ra[i].Status != rb[i].Status || ra[i].Message != rb[i].Message {
			t.Fatalf("result %d differs: %+v vs %+v", i+1, ra[i], rb[i])
		}
	}
	if retried := retriedActivities(t, tc, jobs.JobWorkflowID(jobA)); retried < 2 {
		t.Errorf("%d chunks were retried, want at least the two committed before their worker died", retried)
	} else {
		t.Logf("%d chunks were retried after a kill", retried)
	}
}
