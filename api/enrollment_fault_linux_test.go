package api_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"iam/activities"
	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/secret/secrettest"
	"iam/models/sqldb"
	"iam/models/store"
	"iam/worker"
)

// Environment of a worker subprocess (TestEnrollmentWorkerProcess).
const (
	envChildWorker   = "IAM_TEST_ENROLL_WORKER"
	envChildDSN      = "IAM_TEST_ENROLL_DSN"
	envChildTemporal = "IAM_TEST_ENROLL_TEMPORAL"
	envChildNS       = "IAM_TEST_ENROLL_NAMESPACE"
	envChildQueue    = "IAM_TEST_ENROLL_QUEUE"
)

// TestEnrollmentWorkerProcess is not a test: run by the fault test as a
// subprocess, it is a worker that polls until it is killed.
func TestEnrollmentWorkerProcess(t *testing.T) {
	if os.Getenv(envChildWorker) == "" {
		t.Skip("a worker subprocess of TestEnrollment_WorkerKilledFiveTimes")
	}
	ctx := context.Background()
	db, err := sqldb.Open(ctx, os.Getenv(envChildDSN))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: os.Getenv(envChildTemporal), Namespace: os.Getenv(envChildNS)})
	if err != nil {
		t.Fatal(err)
	}
	allow, err := activities.ParseCIDRs(os.Getenv("IAM_EVENT_HOOKS_ALLOW_PRIVATE")) // the event hook fault test's receiver
	if err != nil {
		t.Fatal(err)
	}
	w := worker.NewOn(c, os.Getenv(envChildQueue), worker.Deps{Store: store.NewStore(db).SealBlobs(secrettest.Box), Secrets: secrettest.Box,
		EventHookAllowPrivate: allow})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	select {} // until SIGKILL
}

// envCrashAfterChunkCommit is the test-only variable that makes a worker
// SIGKILL itself right after its n-th committed chunk (see
// activities/testhook_crash.go).
const envCrashAfterChunkCommit = "IAM_TEST_CRASH_AFTER_CHUNK_COMMIT"

// startWorkerProcess runs a worker subprocess, with extra variables in its
// environment; the kernel kills it should this process die first.
func startWorkerProcess(t *testing.T, dsn, hostPort, ns, queue string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnrollmentWorkerProcess$", "-test.count=1") //nolint:gosec // G204: this test binary, with fixed arguments
	cmd.Env = append(os.Environ(), envChildWorker+"=1", envChildDSN+"="+dsn, envChildTemporal+"="+hostPort,
		envChildNS+"="+ns, envChildQueue+"="+queue, secrettest.Env())
	cmd.Env = append(cmd.Env, extra...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// A 100,000-row job whose worker is SIGKILLed five times still completes,
// every row processed exactly once, with results identical to an undisturbed
// run of the same file. Three kills come from outside while a chunk is in
// flight (before its commit); two come from the worker itself, through the
// test-only hook, right after a chunk's commit and before its activity
// completes, so that Temporal retries a chunk already written.
func TestEnrollment_WorkerKilledFiveTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("long fault test")
	}
	const rows = 100_000
	dsn := dbtest.PostgresURL(t)
	ctx := context.Background()
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cerr := db.Close(); cerr != nil {
			t.Error(cerr)
		}
	})
	env := apitest.New(t, db, apitest.Options{})
	hostPort, ns := apitest.TemporalAddress(t)
	tc, err := client.Dial(client.Options{HostPort: hostPort, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	env.Jobs.Client = tc
	env.Jobs.TaskQueue = fmt.Sprintf("enroll-fault-%d", sqldb.NewID())

	disturbed, undisturbed := env.Org, env.NewBareOrg("Reference")
	usersA := seedUsers(t, db, disturbed, rows)
	usersB := seedUsers(t, db, undisturbed, rows)
	var b strings.Builder
	b.WriteString("Primary Email,Email Address,Mobile Number\n")
	for i := 1; i <= rows; i++ {
		mobile := fmt.Sprintf("+1415%07d", i)
		if i%997 == 0 {
			mobile = "not a number"
		}
		fmt.Fprintf(&b, "user%d@example.com,otp%d@example.com,%s\n", i, i, mobile)
	}
	csv := b.String()
	run := func(org *identity.Organization) int64 {
		ids := factorIDs(t, env, org)
		tok := env.Token(org, "svc.quick_enrollment.ALL")
		return uploadCSV(t, env, tok, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP] + "," + ids[enrollment.FactorSMSOTP]}, {"chunk_rows", "2000"}}, csv)
	}

	w := startWorkerProcess(t, dsn, hostPort, ns, env.Jobs.TaskQueue)
	began := time.Now()
	jobA := run(disturbed)
	// The worker crashes itself after its third committed chunk; the next one
	// runs until the test kills it.
	selfKill := func() {
		t.Helper()
		w = startWorkerProcess(t, dsn, hostPort, ns, env.Jobs.TaskQueue, envCrashAfterChunkCommit+"=3")
		_ = w.Wait()
		ws, ok := w.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the worker with %s=3 ended %s, want killed by SIGKILL", envCrashAfterChunkCommit, w.ProcessState)
		}
		j, jerr := env.Store.Jobs.Get(ctx, disturbed.ID, jobA)
		if jerr != nil {
			t.Fatal(jerr)
		}
		t.Logf("the worker killed itself after a chunk's commit at %d rows processed (%s)", j.Processed, time.Since(began).Round(time.Millisecond))
		w = startWorkerProcess(t, dsn, hostPort, ns, env.Jobs.TaskQueue)
	}
	for i, at := range []int64{15_000, 45_000, 75_000} {
		env.WaitJob(disturbed, jobA, 3*time.Minute, func(j *jobs.Job) bool { return j.Processed >= at })
		if err = w.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = w.Wait()
		t.Logf("killed the worker at %d rows processed (%s)", at, time.Since(began).Round(time.Millisecond))
		if i < 2 {
			selfKill()
		} else {
			w = startWorkerProcess(t, dsn, hostPort, ns, env.Jobs.TaskQueue)
		}
	}
	a := env.WaitJob(disturbed, jobA, 5*time.Minute, finished)
	t.Logf("disturbed job ended %s in %s", a.Status, time.Since(began).Round(time.Millisecond))

	began = time.Now()
	jobB := run(undisturbed)
	bJob := env.WaitJob(undisturbed, jobB, 5*time.Minute, finished)
	t.Logf("undisturbed job ended %s in %s", bJob.Status, time.Since(began).Round(time.Millisecond))

	wantErrors := int64(rows / 997)
	for _, j := range []*jobs.Job{a, bJob} {
		if j.Status != jobs.JobWarning || j.Processed != rows || j.Total != rows || j.ErrorCount != wantErrors || j.SuccessCount != rows-wantErrors {
			t.Fatalf("job %d: %s %d/%d, %d ok, %d failed", j.ID, j.Status, j.Processed, j.Total, j.SuccessCount, j.ErrorCount)
		}
	}
	ra, rb := allResults(t, env, jobA), allResults(t, env, jobB)
	if len(ra) != rows || len(rb) != rows {
		t.Fatalf("%d and %d results, want %d each", len(ra), len(rb), rows)
	}
	for i := range ra {
		x, y := ra[i], rb[i]
		if x.Seq != int64(i+1) || x.Seq != y.Seq || x.Status != y.Status || x.Message != y.Message ||
			x.EntityID != models.FormatID(usersA[i+1]) || y.EntityID != models.FormatID(usersB[i+1]) {
			t.Fatalf("row %d differs: %+v vs %+v", i+1, x, y)
		}
	}
	// Exactly once: one enrollment per factor of every good row, each
	// written by its own row of the job.
	n, err := db.NewSelect().Table("enrollments").Where("org_id = ? AND job_id = ?", disturbed.ID, jobA).Count(ctx)
	if err != nil || int64(n) != 2*(rows-wantErrors) {
		t.Errorf("%d enrollments (%v), want %d", n, err, 2*(rows-wantErrors))
	}
	bad, err := db.NewSelect().Table("enrollments").Where("org_id = ? AND source_row <> CAST(substr(value, 4, length(value) - 15) AS BIGINT) AND factor_type = 'EMAIL_OTP'", disturbed.ID).Count(ctx)
	if err != nil || bad != 0 {
		t.Errorf("%d enrollments hold another row's data (%v)", bad, err)
	}
	// The kills hit chunks in flight and chunks committed: Temporal retried
	// them (at least the two whose worker died after their commit).
	if retried := retriedActivities(t, tc, jobs.JobWorkflowID(jobA)); retried < 2 {
		t.Errorf("%d chunks were retried, want at least the two committed before their worker died", retried)
	} else {
		t.Logf("%d chunks were retried after a kill", retried)
	}
}

// retriedActivities counts the activities of a workflow's runs that
// completed on a later attempt.
func retriedActivities(t *testing.T, c client.Client, workflowID string) int {
	t.Helper()
	n := 0
	iter := c.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
			n++
		}
	}
	return n
}
