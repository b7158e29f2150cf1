package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"iam/deploy/devserver"
	"iam/models"
	"iam/models/dbtest"
	"iam/workflows"
)

// The faults of the shared parts, with `iam serve` and two `iam worker`
// processes on PostgreSQL (docs/testing.md): the database restarted, and
// the Temporal frontend stopped for a while, each in the middle of a job.
// Both take a minute or two; -short skips them.

// e2eShape is the production shape of one test: `iam serve` and workers on
// one database and one Temporal namespace.
type e2eShape struct {
	t       *testing.T
	env     []string
	serve   *e2eProc
	apiAddr string
	n       int
}

// e2eStartShape migrates nothing (the database must be migrated) and starts
// `iam serve` with the reconciler at a quick pace, waiting until it is ready.
func e2eStartShape(t *testing.T, dsn, temporalAddr, namespace string, extra ...string) *e2eShape {
	t.Helper()
	s := &e2eShape{t: t, env: append(append(e2eAdminEnv(),
		"IAM_DATABASE_URL="+dsn,
		"IAM_SECRET_KEY="+e2eSecretKey,
		"IAM_ENCRYPTION_KEY="+e2eEncryptionKey,
		"IAM_TEMPORAL_ADDRESS="+temporalAddr,
		"IAM_TEMPORAL_NAMESPACE="+namespace,
		"IAM_HTTP_ADDR=127.0.0.1:0",
		"IAM_RECONCILE_INTERVAL=300ms",
		"IAM_RECONCILE_GRACE=0s",
	), extra...)}
	s.serve = e2eStart(t, "serve", s.env, "serve")
	e2eWaitFor(t, 30*time.Second, 20*time.Millisecond, "iam serve logs where it listens", func() (bool, string) {
		rec := s.serve.logLine("API listening")
		s.apiAddr, _ = rec["address"].(string)
		return s.apiAddr != "", "no \"API listening\" record yet"
	}, s.serve)
	e2eWaitReady(t, s.serve, s.apiAddr, 30*time.Second)
	return s
}

// startWorkers starts count workers with the shape's environment and extra,
// and waits until each polls.
func (s *e2eShape) startWorkers(count int, extra ...string) []*e2eProc {
	s.t.Helper()
	var ws []*e2eProc
	for range count {
		s.n++
		w := e2eStart(s.t, fmt.Sprintf("worker-%d", s.n), append(slices.Clone(s.env), extra...), "worker")
		e2eWaitFor(s.t, 30*time.Second, 20*time.Millisecond, w.name+" polls", func() (bool, string) {
			return w.logLine("worker polling") != nil, "no \"worker polling\" record yet"
		}, w, s.serve)
		ws = append(ws, w)
	}
	return ws
}

// The test binary runs as a Temporal server process of its own when
// e2eTemporalHelperDir is set (TestMain): a frontend a test can stop and
// start again on the same port and SQLite file, as an operator restarts
// Temporal.
const (
	e2eTemporalHelperDir  = "IAM_TEST_TEMPORAL_HELPER_DIR"
	e2eTemporalHelperPort = "IAM_TEST_TEMPORAL_HELPER_PORT"
)

// runTemporalHelper serves Temporal from dir on port until SIGTERM.
func runTemporalHelper(dir string) int {
	port, err := strconv.Atoi(os.Getenv(e2eTemporalHelperPort))
	if err != nil {
		fmt.Fprintln(os.Stderr, "temporal helper: bad port:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ts, err := devserver.Start(ctx, devserver.Config{DataDir: dir, FrontendPort: port, DisableUI: true,
		SearchAttributes: workflows.SearchAttributes()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "temporal helper:", err)
		return 1
	}
	fmt.Println("temporal ready", ts.FrontendAddress())
	<-ctx.Done()
	if err := ts.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "temporal helper: stop:", err)
		return 1
	}
	return 0
}

// e2eTemporalProcess is a Temporal server in a process of its own.
type e2eTemporalProcess struct {
	t    *testing.T
	dir  string
	port int
	proc *e2eProc
}

func e2eStartTemporalProcess(t *testing.T) *e2eTemporalProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	tp := &e2eTemporalProcess{t: t, dir: t.TempDir(), port: port}
	tp.start()
	return tp
}

func (tp *e2eTemporalProcess) addr() string { return fmt.Sprintf("127.0.0.1:%d", tp.port) }

// start runs the server and waits until it serves.
func (tp *e2eTemporalProcess) start() {
	tp.t.Helper()
	tp.proc = e2eStartProgram(tp.t, os.Args[0], "temporal", []string{e2eTemporalHelperDir + "=" + tp.dir,
		e2eTemporalHelperPort + "=" + strconv.Itoa(tp.port)}, "-test.run=^$")
	e2eWaitFor(tp.t, 2*time.Minute, 50*time.Millisecond, "the Temporal server starts", func() (bool, string) {
		return len(tp.proc.stdout()) > 0, "not ready yet"
	}, tp.proc)
}

// stop stops the server gracefully and waits until it is gone.
func (tp *e2eTemporalProcess) stop() {
	tp.t.Helper()
	tp.proc.signal(syscall.SIGTERM)
	if !tp.proc.waitExit(time.Minute) {
		tp.t.Fatalf("the Temporal server did not stop within a minute")
	}
}

// TestFaults_PostgresRestartedMidEnrollment: PostgreSQL restarted (fast
// stop, then start: every session ends with 57P01) in the middle of a
// 300,000-row enrollment run by two workers: the job completes, every row
// exactly once with the result its data calls for.
func TestFaults_PostgresRestartedMidEnrollment(t *testing.T) {
	if testing.Short() {
		t.Skip("a 300,000-row enrollment through the processes")
	}
	t.Parallel()
	const rows = 300_000
	cluster := dbtest.NewCluster(t)
	temporalAddr, namespace := e2eTemporal(t)
	shape := e2eStartShape(t, cluster.URL(), temporalAddr, namespace)
	workers := shape.startWorkers(2)
	store := e2eOpenDB(t, cluster.URL())
	org := e2eFirstOrg(t, store.Store)
	users := e2eSeedFlowUsers(t, store, org, rows)
	token := e2eIssueToken(t, []string{"IAM_DATABASE_URL=" + cluster.URL(), "IAM_SECRET_KEY=" + e2eSecretKey}, e2eFlowScopes, "--user", e2eAdminEmail)
	jobID := e2eUploadEnrollment(t, shape.apiAddr, token, e2eFlowCSV(rows), 5_000)
	procs := append([]*e2eProc{shape.serve}, workers...)

	e2eWaitFor(t, 2*time.Minute, 20*time.Millisecond, "the enrollment is under way", func() (bool, string) {
		j := e2eGetJob(t, store.Store, org, jobID)
		return j.Processed >= 20_000, fmt.Sprintf("%s %d/%d", j.Status, j.Processed, j.Total)
	}, procs...)
	before := e2eGetJob(t, store.Store, org, jobID)
	cluster.Stop(false)
	time.Sleep(2 * time.Second)
	cluster.Start()
	t.Logf("PostgreSQL restarted at %d/%d rows", before.Processed, before.Total)
	if before.Status.Finished() {
		t.Fatal("the enrollment finished before the restart: make it longer")
	}
	job := e2eWaitJob(t, store.Store, org, jobID, 5*time.Minute, e2eFinished, procs...)
	e2eCheckEnrollmentOf(t, store, org, job, users, 1, rows)
}

// TestFaults_TemporalStoppedMidJob: the Temporal server stopped for 30 s in
// the middle of an enrollment and started again: /readyz of serve says
// Temporal is down meanwhile, an upload meanwhile is accepted QUEUED, and
// once Temporal is back both jobs complete by themselves, every row exactly
// once.
func TestFaults_TemporalStoppedMidJob(t *testing.T) {
	if testing.Short() {
		t.Skip("stops Temporal for 30 s")
	}
	t.Parallel()
	const rows, down = 40_000, 30 * time.Second
	dsn := dbtest.PostgresURL(t)
	e2eEmptySchema(t, dsn)
	if code, _, errOut := e2eRun(t, "migrate-up", []string{"IAM_DATABASE_URL=" + dsn}, "migrate", "up"); code != 0 {
		t.Fatalf("iam migrate up exited %d: %s", code, errOut)
	}
	temporal := e2eStartTemporalProcess(t)
	shape := e2eStartShape(t, dsn, temporal.addr(), devserver.DefaultNamespace)
	workers := shape.startWorkers(2)
	procs := append([]*e2eProc{shape.serve}, workers...)
	store := e2eOpenDB(t, dsn)
	org := e2eFirstOrg(t, store.Store)
	users := e2eSeedFlowUsers(t, store, org, rows+rows/4)
	token := e2eIssueToken(t, []string{"IAM_DATABASE_URL=" + dsn, "IAM_SECRET_KEY=" + e2eSecretKey}, e2eFlowScopes, "--user", e2eAdminEmail)
	first := e2eUploadEnrollment(t, shape.apiAddr, token, e2eFlowCSV(rows), 1_000)
	e2eWaitFor(t, 2*time.Minute, 10*time.Millisecond, "the enrollment is under way", func() (bool, string) {
		j := e2eGetJob(t, store.Store, org, first)
		return j.Processed >= 2_000, fmt.Sprintf("%s %d/%d", j.Status, j.Processed, j.Total)
	}, procs...)

	temporal.stop()
	stoppedAt := time.Now()
	at := e2eGetJob(t, store.Store, org, first)
	t.Logf("Temporal stopped at %d/%d rows", at.Processed, at.Total)
	if at.Status.Finished() {
		t.Fatal("the enrollment finished before Temporal stopped: make it longer")
	}
	e2eWaitFor(t, 20*time.Second, 100*time.Millisecond, "/readyz says Temporal is down", func() (bool, string) {
		status, body := e2eHTTPGet("http://" + shape.apiAddr + "/readyz")
		return status == http.StatusServiceUnavailable && bytes.Contains(body, []byte(`"temporal":"unavailable"`)), fmt.Sprintf("%d %s", status, body)
	}, procs...)
	second := e2eUploadEnrollment(t, shape.apiAddr, token, e2eFlowCSVRange(rows+1, rows+rows/4), 1_000)
	if j := e2eGetJob(t, store.Store, org, second); j.Status != models.JobQueued {
		t.Errorf("an upload while Temporal is down: %s, want QUEUED", j.Status)
	}
	time.Sleep(time.Until(stoppedAt.Add(down)))
	for _, p := range procs {
		p.failIfExited()
	}
	temporal.start()
	t.Logf("Temporal started again after %v", time.Since(stoppedAt).Round(time.Second))

	job := e2eWaitJob(t, store.Store, org, first, 5*time.Minute, e2eFinished, procs...)
	e2eCheckEnrollmentOf(t, store, org, job, users, 1, rows)
	job = e2eWaitJob(t, store.Store, org, second, 5*time.Minute, e2eFinished, procs...)
	e2eCheckEnrollmentOf(t, store, org, job, users, rows+1, rows+rows/4)
	e2eWaitReady(t, shape.serve, shape.apiAddr, 30*time.Second)
}
