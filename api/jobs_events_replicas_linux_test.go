package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/jobs"
	"iam/models/sqldb"
)

// TestJobEvents_TwoReplicas100kEnrollment is the scenario: a
// client follows a 100,000-row enrollment on PostgreSQL through two API
// processes of their own (as two `iam serve` replicas): it reads the first
// events from one, drops the connection, reconnects to the other with
// Last-Event-ID, and sees progress that only grows up to the final state.
// Neither process runs the job; the state they stream is the database's.
func TestJobEvents_TwoReplicas100kEnrollment(t *testing.T) {
	if testing.Short() {
		t.Skip("a 100,000-row job through two API processes: not in -short")
	}
	const rows = 100_000
	dsn := dbtest.PostgresURL(t)
	ctx := t.Context()
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	env := apitest.New(t, db, apitest.Options{Temporal: true})
	seedUsers(t, db, env.Org, rows)
	ids := factorIDs(t, env, env.Org)
	tok := env.Token(env.Org, "svc.quick_enrollment.CREATE", "svc.job.READ")
	replicaA, _ := startAPIProcess(t, dsn, env.Org.ID, envAPIProcessPoll+"=100ms")
	replicaB, _ := startAPIProcess(t, dsn, env.Org.ID, envAPIProcessPoll+"=100ms")

	var b strings.Builder
	b.WriteString("Primary Email,Email Address\n")
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&b, "user%d@example.com,otp%d@example.com\n", i, i)
	}
	began := time.Now()
	jobID := uploadCSV(t, env, tok, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}, {"chunk_rows", "1000"}}, b.String())

	f := &eventFollower{t: t, jobID: jobID}
	first := openEventsAt(t, ctx, replicaA, apiProcessToken, jobID, "")
	if first.resp.StatusCode != http.StatusOK {
		t.Fatalf("replica A: %d", first.resp.StatusCode)
	}
	lastID, ended := f.follow(first, 3)
	first.close()
	if ended {
		t.Fatalf("the job ended within the first three events")
	}
	before := len(f.seen)
	second := openEventsAt(t, ctx, replicaB, apiProcessToken, jobID, lastID)
	if second.resp.StatusCode != http.StatusOK {
		t.Fatalf("replica B: %d", second.resp.StatusCode)
	}
	_, ended = f.follow(second, 0)
	second.close()
	second.check(t)
	if !ended {
		t.Fatalf("replica B's stream closed before the end (%d events)", len(f.seen))
	}
	end := f.seen[len(f.seen)-1]
	t.Logf("%d rows in %s: %d events from replica A (last at %d rows), %d from replica B",
		rows, time.Since(began).Round(time.Millisecond), before, f.seen[before-1].Progress.Processed, len(f.seen)-before)
	if end.Status != string(jobs.JobCompleted) || end.Progress.Processed != rows || end.Progress.Total != rows || end.Details.SuccessCount != rows {
		t.Errorf("final event: %s %d/%d, %d ok", end.Status, end.Progress.Processed, end.Progress.Total, end.Details.SuccessCount)
	}
	if len(f.seen) < before+2 {
		t.Errorf("%d events from replica B, want progress and the end", len(f.seen)-before)
	}
}
