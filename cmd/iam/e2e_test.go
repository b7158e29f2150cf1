package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"iam/activities"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/sqldb"
	"iam/models/store"
)

// The tests below run the built binary in its three shapes: `iam dev` alone,
// `iam migrate`, `iam serve` and two `iam worker` processes on PostgreSQL and
// a Temporal server, and refusing a bad configuration. Jobs are written
// straight into the app database as QUEUED, so each job also proves that the
// running process's reconciler starts what it finds there.
//
// Jobs are read back both from the database (every result row) and over
// HTTP (GET /api/v1/jobs and /jobs/{id}, with a token from `iam token` for the
// bootstrap admin, answers checked against the OpenAPI document).
//
// e2e_flows_test.go drives real bulk work (a CSV enrollment, a dynamic
// group's recompute, a notification run) through both shapes over HTTP,
// with kills in the middle of each.

func TestMain(m *testing.M) { dbtest.Main(m) }

// e2eDevReadyWithin is how soon `iam dev` must answer /readyz after it starts.
const e2eDevReadyWithin = 5 * time.Second

// The first admin the binary makes on a fresh database, and the scope the
// tests' tokens hold.
const (
	e2eAdminEmail    = "admin@e2e.example.com"
	e2eAdminPassword = "e2e-Admin-passw0rd-long-enough" //nolint:gosec // the password of a test's throwaway admin
	e2eJobReadScope  = "svc.job.READ"
)

// e2eSecretKey is IAM_SECRET_KEY of the production shape; e2eEncryptionKey
// its IAM_ENCRYPTION_KEY (32 bytes as 64 hex digits).
const (
	e2eSecretKey     = "e2e-secret-key-0123456789abcdef-0123456789abcdef" //nolint:gosec // the secret of a test's throwaway service
	e2eEncryptionKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
)

// e2eAdminEnv names the first admin.
func e2eAdminEnv() []string {
	return []string{"IAM_BOOTSTRAP_ADMIN_EMAIL=" + e2eAdminEmail, "IAM_BOOTSTRAP_ADMIN_PASSWORD=" + e2eAdminPassword}
}

// e2eDevEnv is the configuration of every `iam dev` here: free ports for the
// API, Temporal and its UI, and a reconciler that does not make tests wait.
func e2eDevEnv() []string {
	return append(e2eAdminEnv(),
		"IAM_HTTP_ADDR=127.0.0.1:0",
		"IAM_DEV_TEMPORAL_PORT=0",
		"IAM_DEV_UI_PORT=0",
		"IAM_RECONCILE_INTERVAL=300ms",
		"IAM_RECONCILE_GRACE=0s",
	)
}

var (
	e2eDevReadyLine = regexp.MustCompile(`iam dev is ready in (\S+)`)
	e2eDevAPILine   = regexp.MustCompile(`API:\s+http://(\S+)/api/v1`)
	e2eDevUILine    = regexp.MustCompile(`Temporal Web UI:\s+http://(\S+)`)
	e2eDevGRPCLine  = regexp.MustCompile(`Temporal gRPC:\s+(\S+)\s+\(namespace (\S+)\)`)
)

// e2eDevProc is a running `iam dev` and where it says things are.
type e2eDevProc struct {
	*e2eProc
	api, ui, grpc, namespace string
	ready                    time.Duration // from process start to /readyz 200
}

// e2eStartDev starts `iam dev` on dataDir and waits until /readyz answers 200.
func e2eStartDev(t *testing.T, name, dataDir string) *e2eDevProc {
	t.Helper()
	return e2eStartDevWith(t, name, dataDir, e2eDevEnv())
}

// e2eStartDevWith is e2eStartDev with the environment env.
func e2eStartDevWith(t *testing.T, name, dataDir string, env []string) *e2eDevProc {
	t.Helper()
	p := e2eStart(t, name, env, "dev", "--data-dir", dataDir)
	d := &e2eDevProc{e2eProc: p}
	d.api = p.waitOutput("stdout", e2eDevAPILine, 60*time.Second)[1]
	e2eWaitReady(t, p, d.api, 60*time.Second)
	d.ready = time.Since(p.started)
	// Everything is printed before the API serves, so before /readyz answers.
	out := p.stdout()
	ui, grpc := e2eDevUILine.FindStringSubmatch(out), e2eDevGRPCLine.FindStringSubmatch(out)
	if ui == nil || grpc == nil {
		t.Fatalf("%s does not say where the Temporal UI and server are:\n%s", name, out)
	}
	d.ui, d.grpc, d.namespace = ui[1], grpc[1], grpc[2]
	reported := ""
	if m := e2eDevReadyLine.FindStringSubmatch(out); m != nil {
		reported = m[1]
	}
	t.Logf("%s: /readyz answered 200 %v after the process started (it reports ready in %s)",
		name, d.ready.Round(time.Millisecond), reported)
	return d
}

// TestDev_JobCompletesAndShowsInTemporalUI starts `iam dev` on an empty data
// folder: it is ready within e2eDevReadyWithin, its Temporal UI answers, and a
// job queued in its database completes and shows, completed, in the UI.
func TestDev_JobCompletesAndShowsInTemporalUI(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	dev := e2eStartDev(t, "dev", dataDir)
	if dev.ready > e2eDevReadyWithin {
		t.Errorf("iam dev took %v to be ready, want under %v", dev.ready.Round(time.Millisecond), e2eDevReadyWithin)
	}

	if status, body := e2eHTTPGet("http://" + dev.ui + "/"); status != http.StatusOK {
		t.Errorf("Temporal UI at %s answers %d: %.300s", dev.ui, status, body)
	}
	// Its namespace keeps closed workflows 7 days (docs/operations.md).
	nc, err := client.NewNamespaceClient(client.Options{HostPort: dev.grpc, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := nc.Describe(context.Background(), dev.namespace)
	nc.Close()
	if err != nil {
		t.Fatalf("describe namespace %s: %v", dev.namespace, err)
	}
	if got := ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(); got != 7*24*time.Hour {
		t.Errorf("namespace %s keeps closed workflows %v, want 7 days", dev.namespace, got)
	}
	if status, body := e2eAPIGet(t, dev.api, "/api/v1/jobs", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/jobs without a token answers %d, want 401: %.300s", status, body)
	}

	store := e2eOpenDB(t, "sqlite:"+filepath.Join(dataDir, "iam.db"))
	org := e2eFirstOrg(t, store.Store)
	const items = 40
	job := e2eQueueDiagnostic(t, store.Store, org, activities.DiagnosticParams{Items: items, ChunkSize: 5, DelayMillis: 25})
	job = e2eWaitJob(t, store.Store, org, job.ID, 30*time.Second, e2eFinished, dev.e2eProc)
	e2eCheckCompleted(t, store.Store, job, items)
	token := e2eIssueToken(t, nil, e2eJobReadScope, "--data-dir", dataDir, "--user", e2eAdminEmail)
	e2eCheckJobOverHTTP(t, dev.api, token, job, items)

	// The Temporal UI's HTTP API (the ui-server proxies /api/v1 to the
	// frontend's HTTP API) describes the workflow...
	wid := job.WorkflowID()
	describe := fmt.Sprintf("http://%s/api/v1/namespaces/%s/workflows/%s", dev.ui, url.PathEscape(dev.namespace), url.PathEscape(wid))
	e2eWaitFor(t, 10*time.Second, 50*time.Millisecond, "the Temporal UI shows the workflow completed", func() (bool, string) {
		status, body := e2eHTTPGet(describe)
		if status != http.StatusOK {
			return false, fmt.Sprintf("GET %s: %d %.300s", describe, status, body)
		}
		var d struct {
			Info e2eUIExecution `json:"workflowExecutionInfo"`
		}
		if err := json.Unmarshal(body, &d); err != nil {
			return false, fmt.Sprintf("GET %s: %v: %.300s", describe, err, body)
		}
		return d.Info.is(wid, "COMPLETED"), fmt.Sprintf("%+v", d.Info)
	}, dev.e2eProc)

	// ...and finds it by the job's search attributes, as a user filtering
	// the workflow list would.
	query := fmt.Sprintf(`IamJobId=%q AND IamJobStatus="COMPLETED" AND IamJobProcessed=%d`, models.FormatID(job.ID), items)
	list := fmt.Sprintf("http://%s/api/v1/namespaces/%s/workflows?query=%s", dev.ui, url.PathEscape(dev.namespace), url.QueryEscape(query))
	e2eWaitFor(t, 10*time.Second, 100*time.Millisecond, "the Temporal UI lists the workflow by its search attributes", func() (bool, string) {
		status, body := e2eHTTPGet(list)
		if status != http.StatusOK {
			return false, fmt.Sprintf("GET %s: %d %.300s", list, status, body)
		}
		var l struct {
			Executions []e2eUIExecution `json:"executions"`
		}
		if err := json.Unmarshal(body, &l); err != nil {
			return false, fmt.Sprintf("GET %s: %v: %.300s", list, err, body)
		}
		return len(l.Executions) == 1 && l.Executions[0].is(wid, "COMPLETED"), fmt.Sprintf("%.500s", body)
	}, dev.e2eProc)

	// Ctrl-C (SIGTERM from a supervisor) stops it cleanly.
	began := time.Now()
	dev.signal(syscall.SIGTERM)
	if !dev.waitExit(30 * time.Second) {
		t.Fatalf("iam dev still runs 30s after SIGTERM")
	}
	t.Logf("iam dev stopped %v after SIGTERM", time.Since(began).Round(time.Millisecond))
	if code := dev.state.ExitCode(); code != 0 {
		t.Errorf("iam dev exited with %d after SIGTERM, want 0", code)
	}
}

// e2eUIExecution is the part of a workflow execution the UI's API returns that
// the tests look at.
type e2eUIExecution struct {
	Execution struct {
		WorkflowID string `json:"workflowId"`
	} `json:"execution"`
	Type struct {
		Name string `json:"name"`
	} `json:"type"`
	Status string `json:"status"`
}

// is reports whether e is the diagnostic workflow wid in status (COMPLETED,
// which the API spells WORKFLOW_EXECUTION_STATUS_COMPLETED).
func (e e2eUIExecution) is(wid, status string) bool {
	return e.Execution.WorkflowID == wid && e.Type.Name == "Diagnostic" &&
		strings.TrimPrefix(e.Status, "WORKFLOW_EXECUTION_STATUS_") == status
}

// TestDev_JobSurvivesKill9 kills `iam dev` with SIGKILL in the middle of a
// job and starts it again on the same data folder: the job carries on and
// completes with exactly one result per item.
func TestDev_JobSurvivesKill9(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	dev := e2eStartDev(t, "dev", dataDir)
	store := e2eOpenDB(t, "sqlite:"+filepath.Join(dataDir, "iam.db"))
	org := e2eFirstOrg(t, store.Store)

	const items = 300
	job := e2eQueueDiagnostic(t, store.Store, org, activities.DiagnosticParams{Items: items, ChunkSize: 10, DelayMillis: 20})
	job = e2eWaitJob(t, store.Store, org, job.ID, 30*time.Second, func(j *jobs.Job) bool {
		return j.Processed >= 30 || j.Status.Finished()
	}, dev.e2eProc)
	if job.Status.Finished() || job.Processed >= items {
		t.Fatalf("the job ended before the kill (%s, %d/%d): make it longer", job.Status, job.Processed, items)
	}
	dev.kill()
	killed := e2eGetJob(t, store.Store, org, job.ID)
	t.Logf("killed iam dev with the job %s at %d/%d", killed.Status, killed.Processed, items)
	if killed.Status != jobs.JobRunning || killed.Processed >= items {
		t.Fatalf("after the kill the job is %s at %d/%d, want RUNNING and unfinished", killed.Status, killed.Processed, items)
	}

	restarted := e2eStartDev(t, "dev-restarted", dataDir)
	began := time.Now()
	job = e2eWaitJob(t, store.Store, org, job.ID, 60*time.Second, e2eFinished, restarted.e2eProc)
	t.Logf("the job completed %v after the restart was ready", time.Since(began).Round(time.Millisecond))
	e2eCheckCompleted(t, store.Store, job, items)
	token := e2eIssueToken(t, nil, e2eJobReadScope, "--data-dir", dataDir, "--user", e2eAdminEmail)
	e2eCheckJobOverHTTP(t, restarted.api, token, job, items)
}

// TestProduction_ServeAndTwoWorkers runs the production shape: `iam migrate
// up` on an empty PostgreSQL database, then `iam serve` and two `iam worker`
// processes on a Temporal server. Jobs complete, and one survives the worker
// running it being killed.
func TestProduction_ServeAndTwoWorkers(t *testing.T) {
	t.Parallel()
	dsn := dbtest.PostgresURL(t)
	e2eEmptySchema(t, dsn)
	dbEnv := []string{"IAM_DATABASE_URL=" + dsn}

	// Migrations: all pending, then applied by `migrate up`, then listed
	// applied by `migrate status`.
	names := e2eMigrationNames(t)
	code, out, errOut := e2eRun(t, "migrate-status-before", dbEnv, "migrate", "status")
	if code != 0 {
		t.Fatalf("iam migrate status exited %d: %s", code, errOut)
	}
	e2eCheckMigrationStatus(t, out, names, "pending")
	code, out, errOut = e2eRun(t, "migrate-up", dbEnv, "migrate", "up")
	if code != 0 {
		t.Fatalf("iam migrate up exited %d: %s", code, errOut)
	}
	for _, name := range names {
		if !strings.Contains(out, "applied "+name+"\n") {
			t.Errorf("iam migrate up does not say it applied %s:\n%s", name, out)
		}
	}
	code, out, errOut = e2eRun(t, "migrate-status-after", dbEnv, "migrate", "status")
	if code != 0 {
		t.Fatalf("iam migrate status exited %d: %s", code, errOut)
	}
	e2eCheckMigrationStatus(t, out, names, "applied")
	code, out, _ = e2eRun(t, "migrate-up-again", dbEnv, "migrate", "up")
	if code != 0 || !strings.Contains(out, "nothing to migrate") {
		t.Errorf("a second iam migrate up exited %d saying %q, want 0 and nothing to migrate", code, out)
	}

	// The services.
	temporalAddr, namespace := e2eTemporal(t)
	shape := e2eStartShape(t, dsn, temporalAddr, namespace)
	serve, apiAddr, workers := shape.serve, shape.apiAddr, shape.startWorkers(2)
	all := append([]*e2eProc{serve}, workers...)

	store := e2eOpenDB(t, dsn)
	org := e2eFirstOrg(t, store.Store)
	const small = 40
	var jobs []*jobs.Job
	for range 4 {
		jobs = append(jobs, e2eQueueDiagnostic(t, store.Store, org, activities.DiagnosticParams{Items: small, ChunkSize: 5, DelayMillis: 5}))
	}
	token := e2eIssueToken(t, []string{"IAM_DATABASE_URL=" + dsn, "IAM_SECRET_KEY=" + e2eSecretKey}, e2eJobReadScope, "--user", e2eAdminEmail)
	for _, job := range jobs {
		done := e2eWaitJob(t, store.Store, org, job.ID, 30*time.Second, e2eFinished, all...)
		e2eCheckCompleted(t, store.Store, done, small)
		e2eCheckJobOverHTTP(t, apiAddr, token, done, small)
	}

	// A longer job; the worker running one of its chunks is killed.
	tc, err := client.Dial(client.Options{
		HostPort:  temporalAddr,
		Namespace: namespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	const items, chunk = 300, 50 // chunks of about a second
	job := e2eQueueDiagnostic(t, store.Store, org, activities.DiagnosticParams{Items: items, ChunkSize: chunk, DelayMillis: 20})
	victim := e2eKillChunkRunner(t, tc, store.Store, org, job, workers, all)
	survivor := workers[0]
	if victim == workers[0] {
		survivor = workers[1]
	}
	began := time.Now()
	done := e2eWaitJob(t, store.Store, org, job.ID, 45*time.Second, e2eFinished, serve, survivor)
	t.Logf("the job completed %v after %s was killed", time.Since(began).Round(time.Millisecond), victim.name)
	e2eCheckCompleted(t, store.Store, done, items)
	e2eCheckJobOverHTTP(t, apiAddr, token, done, items)
	if retried := e2eRetriedChunks(t, tc, job.WorkflowID()); retried == 0 {
		t.Errorf("no chunk of job %d ran twice: the kill of %s did not hit a running chunk", job.ID, victim.name)
	}
}

// e2eKillChunkRunner waits until a chunk of job has just started, asks Temporal
// which worker runs it, and kills that worker with SIGKILL. It returns the
// worker killed.
func e2eKillChunkRunner(t *testing.T, tc client.Client, store *store.Store, org *identity.Organization, job *jobs.Job, workers, all []*e2eProc) *e2eProc {
	t.Helper()
	// A chunk starts as soon as the one before it is recorded: wait for the
	// progress to move, then for the next chunk to be well under way.
	first := e2eWaitJob(t, store, org, job.ID, 30*time.Second, func(j *jobs.Job) bool { return j.Processed > 0 }, all...)
	e2eWaitJob(t, store, org, job.ID, 30*time.Second, func(j *jobs.Job) bool { return j.Processed > first.Processed }, all...)
	time.Sleep(300 * time.Millisecond)

	var victim *e2eProc
	e2eWaitFor(t, 10*time.Second, 50*time.Millisecond, "a worker runs a chunk of the job", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := tc.DescribeWorkflowExecution(ctx, job.WorkflowID(), "")
		if err != nil {
			return false, err.Error()
		}
		for _, a := range d.GetPendingActivities() {
			if a.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
				continue
			}
			identity := a.GetLastWorkerIdentity()
			pid, err := strconv.Atoi(strings.SplitN(identity, "@", 2)[0])
			if err != nil {
				return false, fmt.Sprintf("worker identity %q does not start with a pid", identity)
			}
			for _, w := range workers {
				if w.cmd.Process.Pid == pid {
					victim = w
					return true, ""
				}
			}
			return false, fmt.Sprintf("worker identity %q is none of the workers", identity)
		}
		return false, fmt.Sprintf("no started activity among %d pending", len(d.GetPendingActivities()))
	}, all...)
	before := e2eGetJob(t, store, org, job.ID)
	victim.kill()
	t.Logf("killed %s (pid %d) while it ran a chunk; the job was %s at %d/%d",
		victim.name, victim.cmd.Process.Pid, before.Status, before.Processed, before.Total)
	if before.Status.Finished() {
		t.Fatalf("the job finished before the kill: make it longer")
	}
	return victim
}

// e2eRetriedChunks counts the activities of a workflow's (last run's) history
// that started more than once.
func e2eRetriedChunks(t *testing.T, tc client.Client, workflowID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := tc.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	retried := 0
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
			retried++
		}
	}
	return retried
}

// e2eEmptySchema drops everything in the database at dsn: a database nobody
// has migrated yet.
func e2eEmptySchema(t *testing.T, dsn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, db)
	for _, stmt := range []string{"DROP SCHEMA public CASCADE", "CREATE SCHEMA public"} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

// e2eMigrationNames lists the migrations the binary embeds, as a migrator over
// a scratch database sees them.
func e2eMigrationNames(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqldb.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "scratch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, db)
	m, err := sqldb.Migrator(db)
	if err != nil {
		t.Fatal(err)
	}
	if err = m.Init(ctx); err != nil {
		t.Fatal(err)
	}
	ms, err := m.MigrationsWithStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mig := range ms {
		names = append(names, mig.String())
	}
	if len(names) == 0 {
		t.Fatal("the binary embeds no migrations")
	}
	return names
}

// e2eCheckMigrationStatus checks that `iam migrate status` lists every
// migration in state (pending, or applied in some group).
func e2eCheckMigrationStatus(t *testing.T, out string, names []string, state string) {
	t.Helper()
	for _, name := range names {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s+` + state + `\b`)
		if !re.MatchString(out) {
			t.Errorf("iam migrate status does not list %s as %s:\n%s", name, state, out)
		}
	}
}

// TestBadConfiguration_ExitsWithOneLine: a configuration the binary cannot
// run with makes it exit non-zero at once with one line naming the problem,
// never a stack trace.
func TestBadConfiguration_ExitsWithOneLine(t *testing.T) {
	t.Parallel()
	// A database nobody listens on: the configuration must be refused before
	// anything is dialled.
	const nowhere = "IAM_DATABASE_URL=postgres://iam@127.0.0.1:1/iam"
	// serve checks its secrets before anything else: the other cases carry them.
	secret := "IAM_SECRET_KEY=" + strings.Repeat("s", 40)
	key := "IAM_ENCRYPTION_KEY=" + e2eEncryptionKey
	none := func(*testing.T) []string { return nil }
	set := func(vars ...string) func(*testing.T) []string {
		return func(*testing.T) []string { return vars }
	}
	withSecret := func(env func(*testing.T) []string) func(*testing.T) []string {
		return func(t *testing.T) []string { return append(env(t), secret, key) }
	}
	withKey := func(env func(*testing.T) []string) func(*testing.T) []string {
		return func(t *testing.T) []string { return append(env(t), key) }
	}
	cases := []struct {
		name   string
		env    func(t *testing.T) []string
		args   []string
		naming []string // what the message must name
		// logsFirst lets log records come before the message.
		logsFirst bool
	}{
		{name: "no database URL", env: none, args: []string{"serve"}, naming: []string{"IAM_DATABASE_URL"}},
		{name: "worker without database URL", env: none, args: []string{"worker"}, naming: []string{"IAM_DATABASE_URL"}},
		{name: "unknown log level", env: set(nowhere, secret, key, "IAM_LOG_LEVEL=loud"), args: []string{"serve"}, naming: []string{"IAM_LOG_LEVEL", "loud"}},
		{name: "HTTP address not host:port", env: set(nowhere, secret, key, "IAM_HTTP_ADDR=nonsense"), args: []string{"serve"}, naming: []string{"IAM_HTTP_ADDR", "nonsense"}},
		{name: "not a database URL", env: set("IAM_DATABASE_URL=mysql://iam@localhost/iam", secret, key), args: []string{"serve"}, naming: []string{"database url"}},
		{name: "schema not migrated", env: withSecret(e2eUnmigratedDatabase), args: []string{"serve"}, naming: []string{"schema", "iam migrate up"}},
		{name: "worker on a schema not migrated", env: withKey(e2eUnmigratedDatabase), args: []string{"worker"}, naming: []string{"schema", "iam migrate up"}},
		// The secret is checked before the database is dialled.
		{name: "no secret key", env: set(nowhere, key), args: []string{"serve"}, naming: []string{"IAM_SECRET_KEY"}},
		// So is the encryption key, which serve and worker both need.
		{name: "no encryption key", env: set(nowhere, secret), args: []string{"serve"}, naming: []string{"IAM_ENCRYPTION_KEY"}},
		{name: "worker without encryption key", env: set(nowhere), args: []string{"worker"}, naming: []string{"IAM_ENCRYPTION_KEY"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := append(tc.env(t), "IAM_TEMPORAL_ADDRESS=127.0.0.1:1")
			e2eBinaryFor(t, tc.args) // not timed below
			began := time.Now()
			code, out, errOut := e2eRun(t, "iam", env, tc.args...)
			t.Logf("iam %s exited %d after %v: %s", strings.Join(tc.args, " "), code,
				time.Since(began).Round(time.Millisecond), strings.TrimSpace(errOut))
			e2eCheckCleanFailure(t, code, out, errOut, tc.logsFirst, tc.naming...)
		})
	}
}

// e2eUnmigratedDatabase returns the configuration of an empty PostgreSQL
// database.
func e2eUnmigratedDatabase(t *testing.T) []string {
	dsn := dbtest.PostgresURL(t)
	e2eEmptySchema(t, dsn)
	return []string{"IAM_DATABASE_URL=" + dsn}
}
