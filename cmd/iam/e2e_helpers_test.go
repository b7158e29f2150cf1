package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/server/temporaltest"

	"iam/activities"
	"iam/models"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/sqldb"
	"iam/models/store"
	"iam/workflows"
)

// The end-to-end tests run the iam binary as the operator would: built once
// per test process with `go build`, started with exec and a controlled
// environment, observed through its output, its HTTP endpoints and its
// database, and stopped (or killed) from outside.

// e2eBuild is an iam binary this test process builds once.
type e2eBuild struct {
	once sync.Once
	path string
	err  error
}

// e2eDevBin is the default build, with `iam dev` (the embedded Temporal
// server); e2eProdBin the production build of deploy/Dockerfile (-tags
// nodev), which runs every other command.
var e2eDevBin, e2eProdBin e2eBuild

// e2eKeep holds the write ends of the pipes whose closing, when this
// process exits however it exits, makes the janitors remove the binaries'
// folders.
var e2eKeep struct {
	sync.Mutex
	files []*os.File
}

// e2eBinary builds ./cmd/iam once, with `iam dev`, and returns the
// executable's path.
func e2eBinary(t *testing.T) string { return e2eDevBin.build(t, "") }

// e2eProdBinary builds ./cmd/iam once as deploy/Dockerfile builds it (-tags
// nodev: no embedded Temporal server) and returns the executable's path.
func e2eProdBinary(t *testing.T) string { return e2eProdBin.build(t, "nodev") }

// e2eBinaryFor is the binary that runs args: the default build for dev,
// the production build for everything else.
func e2eBinaryFor(t *testing.T, args []string) string {
	if len(args) > 0 && args[0] == "dev" {
		return e2eBinary(t)
	}
	return e2eProdBinary(t)
}

func (b *e2eBuild) build(t *testing.T, tags string) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "iam-e2e-bin-")
		if err != nil {
			b.err = err
			return
		}
		e2eRemoveWhenProcessEnds(dir)
		goTool, err := exec.LookPath("go")
		if err != nil {
			b.err = fmt.Errorf("no go command to build ./cmd/iam: %w", err)
			return
		}
		path := filepath.Join(dir, "iam")
		began := time.Now()
		// Linked without symbol tables and DWARF, as deploy/Dockerfile links
		// it: a third smaller and quicker to link.
		out, err := exec.Command(goTool, "build", "-tags", tags, "-ldflags=-s -w", "-o", path, ".").CombinedOutput() //nolint:gosec // the go tool from PATH, building this package into the test's own directory
		if err != nil {
			b.err = fmt.Errorf("go build -tags %q ./cmd/iam: %w\n%s", tags, err, out)
			return
		}
		t.Logf("built %s (-tags %q) in %v", path, tags, time.Since(began).Round(time.Millisecond))
		b.path = path
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// e2eRemoveWhenProcessEnds starts a janitor that removes dir once this test
// process has exited, normally or not (the binary is large: a crashed or
// timed-out test must not leave it behind). The janitor waits for the end of
// its standard input, a pipe only this process holds open.
func e2eRemoveWhenProcessEnds(dir string) {
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	janitor := exec.Command("sh", "-c", `cat >/dev/null; rm -rf "$1"`, "janitor", dir) //nolint:gosec // a fixed script; dir, the test's own temporary directory, is an argument to it
	janitor.Stdin = r
	// The pipe's ends only hold descriptors: a failed close loses nothing.
	if err := janitor.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return
	}
	_ = r.Close() // the janitor holds the read end now
	e2eKeep.Lock()
	e2eKeep.files = append(e2eKeep.files, w)
	e2eKeep.Unlock()
	go janitor.Wait() //nolint:errcheck // reaps it should this process outlive it
}

// e2eProc is a running iam process.
type e2eProc struct {
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	outPath string
	errPath string
	started time.Time
	done    chan struct{} // closed once the process has exited
	state   *os.ProcessState
}

// e2eBaseEnv is what every child gets besides its IAM_* variables: nothing of
// the test's own environment that could change the binary's behaviour.
func e2eBaseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// e2eStart runs the binary with args and env (KEY=VALUE, on top of e2eBaseEnv).
// Its stdout and stderr go to files, printed when the test fails. The process
// is killed when the test ends, if it still runs.
func e2eStart(t *testing.T, name string, env []string, args ...string) *e2eProc {
	t.Helper()
	bin := e2eBinaryFor(t, args)
	logDir := t.TempDir() // before the cleanup below, so removed after it
	p := &e2eProc{
		t:       t,
		name:    name,
		outPath: filepath.Join(logDir, name+".stdout"),
		errPath: filepath.Join(logDir, name+".stderr"),
		done:    make(chan struct{}),
	}
	stdout, err := os.Create(p.outPath)
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(p.errPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...) //nolint:gosec // the binary this test built, with the test's arguments
	p.cmd.Env = append(e2eBaseEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	p.cmd.SysProcAttr = e2eChildProcAttr()
	p.started = time.Now()
	err = p.cmd.Start()
	closeT(t, stdout) // the child has its own copies
	closeT(t, stderr)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			p.dump()
		}
	})
	return p
}

// e2eRun runs the binary to its end (at most a minute) and returns its exit
// code, stdout and stderr.
func e2eRun(t *testing.T, name string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := e2eStart(t, name, env, args...)
	if !p.waitExit(time.Minute) {
		// SIGQUIT makes a Go program print where every goroutine is.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		p.waitExit(5 * time.Second)
		t.Fatalf("%s still ran after a minute (its goroutines are on its stderr below)", name)
	}
	return p.state.ExitCode(), p.stdout(), p.stderr()
}

func (p *e2eProc) stdout() string { return e2eReadFile(p.outPath) }
func (p *e2eProc) stderr() string { return e2eReadFile(p.errPath) }

func e2eReadFile(path string) string {
	b, _ := os.ReadFile(path) //nolint:gosec // a log file of the test's own child process
	return string(b)
}

// closeT closes c, failing the test when that fails.
func closeT(t testing.TB, c io.Closer) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// exited reports whether the process has ended.
func (p *e2eProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitExit waits up to timeout for the process to end.
func (p *e2eProc) waitExit(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *e2eProc) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	if !p.waitExit(10 * time.Second) {
		p.t.Errorf("%s (pid %d) survived SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// dump logs the process's output: its head and tail when long.
func (p *e2eProc) dump() {
	const head, tail = 8 << 10, 56 << 10
	for _, f := range []struct{ what, text string }{{"stdout", p.stdout()}, {"stderr", p.stderr()}} {
		text := f.text
		if len(text) > head+tail {
			text = text[:head] + "\n[…]\n" + text[len(text)-tail:]
		}
		if text == "" {
			text = "(empty)"
		}
		p.t.Logf("--- %s %s (pid %d, %s) ---\n%s", p.name, f.what, p.cmd.Process.Pid, p.status(), text)
	}
}

func (p *e2eProc) status() string {
	if !p.exited() {
		return "running"
	}
	return p.state.String()
}

// failIfExited fails the test at once when the process ended early.
func (p *e2eProc) failIfExited() {
	p.t.Helper()
	if p.exited() {
		p.t.Fatalf("%s exited unexpectedly: %s", p.name, p.state)
	}
}

// e2eWaitFor polls cond every interval until it returns true, failing the test
// after timeout with what's last reported. The processes given must keep
// running meanwhile.
func e2eWaitFor(t *testing.T, timeout, interval time.Duration, what string, cond func() (bool, string), procs ...*e2eProc) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		for _, p := range procs {
			p.failIfExited()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v (%s)", what, timeout, detail)
		}
		time.Sleep(interval)
	}
}

// waitOutput waits until the process's stdout (or stderr) matches re and
// returns the submatches.
func (p *e2eProc) waitOutput(stream string, re *regexp.Regexp, timeout time.Duration) []string {
	p.t.Helper()
	var m []string
	e2eWaitFor(p.t, timeout, 10*time.Millisecond, fmt.Sprintf("%s prints %s on %s", p.name, re, stream), func() (bool, string) {
		text := p.stdout()
		if stream == "stderr" {
			text = p.stderr()
		}
		m = re.FindStringSubmatch(text)
		return m != nil, "no match yet"
	}, p)
	return m
}

// logLine returns the first JSON log record on stderr whose msg is msg.
func (p *e2eProc) logLine(msg string) map[string]any {
	sc := bufio.NewScanner(strings.NewReader(p.stderr()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == msg {
			return rec
		}
	}
	return nil
}

// e2eHTTPGet fetches url and returns the status and body; status 0 when the
// request failed.
func e2eHTTPGet(url string) (int, []byte) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer func() { _ = resp.Body.Close() }() // a response read: a failed close loses nothing
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// e2eWaitReady polls http://addr/readyz every 10ms until it answers 200.
func e2eWaitReady(t *testing.T, p *e2eProc, addr string, timeout time.Duration) {
	t.Helper()
	e2eWaitFor(t, timeout, 10*time.Millisecond, p.name+" /readyz answers 200", func() (bool, string) {
		status, body := e2eHTTPGet("http://" + addr + "/readyz")
		return status == http.StatusOK, fmt.Sprintf("%d %s", status, body)
	}, p)
}

// e2eOpenDB opens the app database at dsn from the test process, as an outside
// observer of the binary.
// e2eDB is the database a test opens beside the binary: its store, and the
// handle for the test's own seeds and checks.
type e2eDB struct {
	*store.Store
	DB *bun.DB
}

func e2eOpenDB(t *testing.T, dsn string) *e2eDB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { closeT(t, db) })
	return &e2eDB{Store: store.NewStore(db), DB: db}
}

// e2eFirstOrg returns the organization the binary created on the fresh
// database, waiting for it.
func e2eFirstOrg(t *testing.T, store *store.Store) *identity.Organization {
	t.Helper()
	var org *identity.Organization
	e2eWaitFor(t, 10*time.Second, 50*time.Millisecond, "the first organization exists", func() (bool, string) {
		var err error
		org, err = store.Orgs.First(context.Background())
		return err == nil, fmt.Sprint(err)
	})
	return org
}

// e2eQueueDiagnostic writes a QUEUED diagnostic job straight into the app
// database, as if its start had been lost: only the running process's
// reconciler can start it.
func e2eQueueDiagnostic(t *testing.T, store *store.Store, org *identity.Organization, params activities.DiagnosticParams) *jobs.Job {
	t.Helper()
	input, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	job := &jobs.Job{
		OrgID:      org.ID,
		Kind:       workflows.DiagnosticWorkflowName,
		Module:     workflows.DiagnosticModule,
		ActionName: workflows.DiagnosticAction,
		Input:      input,
	}
	if err := store.Jobs.Create(context.Background(), job); err != nil {
		t.Fatalf("create job: %v", err)
	}
	return job
}

// e2eGetJob reads a job from the database.
func e2eGetJob(t *testing.T, store *store.Store, org *identity.Organization, id int64) *jobs.Job {
	t.Helper()
	job, err := store.Jobs.Get(context.Background(), org.ID, id)
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return job
}

// e2eWaitJob polls the job in the database until done says so, and returns it.
func e2eWaitJob(t *testing.T, store *store.Store, org *identity.Organization, id int64, timeout time.Duration, done func(*jobs.Job) bool, procs ...*e2eProc) *jobs.Job {
	t.Helper()
	var job *jobs.Job
	e2eWaitFor(t, timeout, 20*time.Millisecond, fmt.Sprintf("job %d", id), func() (bool, string) {
		job = e2eGetJob(t, store, org, id)
		return done(job), fmt.Sprintf("%s, %d/%d processed", job.Status, job.Processed, job.Total)
	}, procs...)
	return job
}

func e2eFinished(j *jobs.Job) bool { return j.Status.Finished() }

// e2eCheckCompleted checks that a finished diagnostic job of n items without
// failures ended COMPLETED with n processed and exactly one SUCCESS result
// per item: seq 1..n, no gap, no duplicate.
func e2eCheckCompleted(t *testing.T, store *store.Store, job *jobs.Job, n int64) {
	t.Helper()
	if job.Status != jobs.JobCompleted {
		t.Errorf("job %d is %s (%q), want COMPLETED", job.ID, job.Status, job.Message)
	}
	want := jobs.JobProgress{Processed: n, Total: n, Success: n}
	if got := job.Progress(); got != want {
		t.Errorf("job %d progress %+v, want %+v", job.ID, got, want)
	}
	if job.EndTime == nil {
		t.Errorf("job %d has no end time", job.ID)
	}
	results, err := store.Jobs.Results(context.Background(), job.ID, "", 0, int(n)+100)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(results)) != n {
		t.Errorf("job %d has %d results, want %d", job.ID, len(results), n)
	}
	seen := map[int64]int{}
	for _, r := range results {
		seen[r.Seq]++
		if r.Status != jobs.ResultSuccess || r.EntityID != fmt.Sprint(r.Seq) {
			t.Errorf("job %d result %+v, want SUCCESS for entity %d", job.ID, r, r.Seq)
		}
	}
	for seq := int64(1); seq <= n; seq++ {
		if seen[seq] != 1 {
			t.Errorf("job %d has %d results for item %d, want 1", job.ID, seen[seq], seq)
		}
	}
	for seq := range seen {
		if seq < 1 || seq > n {
			t.Errorf("job %d has a result for item %d, outside 1..%d", job.ID, seq, n)
		}
	}
}

// e2eCheckCleanFailure checks a failed run's output: a non-zero exit, one line
// on stderr that names the problem, and no Go stack trace anywhere. With
// logsFirst, log records may come before that line (a problem found after
// the process has begun its work).
func e2eCheckCleanFailure(t *testing.T, code int, stdout, stderr string, logsFirst bool, wantInMessage ...string) {
	t.Helper()
	if code == 0 {
		t.Errorf("exit code 0, want non-zero")
	}
	for _, out := range []string{stdout, stderr} {
		if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic:") {
			t.Errorf("the output holds a Go stack trace:\n%s", out)
		}
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	msg := lines[len(lines)-1]
	if logsFirst {
		for _, l := range lines[:len(lines)-1] {
			var rec struct{ Level, Msg string }
			if json.Unmarshal([]byte(l), &rec) != nil || rec.Level == "" || rec.Msg == "" {
				t.Errorf("stderr has a line that is neither a log record nor the last one: %q", l)
			}
		}
	} else if len(lines) != 1 {
		t.Errorf("stderr has %d lines, want one message:\n%s", len(lines), stderr)
	}
	if !strings.HasPrefix(msg, "iam: ") {
		t.Errorf("the message %q does not start with \"iam: \"", msg)
	}
	for _, want := range wantInMessage {
		if !strings.Contains(msg, want) {
			t.Errorf("the message %q does not name %q", msg, want)
		}
	}
}

// signal sends sig to the process.
func (p *e2eProc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Fatalf("signal %s: %v", p.name, err)
	}
}

// e2eIssueToken runs `iam token` with env and args (which name the user and
// data) for a token with scopes, and returns the access token.
func e2eIssueToken(t *testing.T, env []string, scopes string, args ...string) string {
	t.Helper()
	args = append([]string{"token", "--scopes", scopes}, args...)
	code, out, errOut := e2eRun(t, "token", env, args...)
	if code != 0 {
		t.Fatalf("iam %s exited %d: %s", strings.Join(args, " "), code, errOut)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal([]byte(out), &tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("iam token printed no access token (%v):\n%s", err, out)
	}
	return tok.AccessToken
}

// e2eAPIGet sends GET http://addr+path with token (none when empty), checks the
// answer against the OpenAPI document, and returns its status and body.
func e2eAPIGet(t *testing.T, addr, path, token string) (int, []byte) {
	t.Helper()
	return e2eAPIDo(t, addr, http.MethodGet, path, token, "", nil)
}

// e2eCheckJobOverHTTP checks that the API shows a finished diagnostic job of n
// items COMPLETED, on its own and in the list of jobs.
func e2eCheckJobOverHTTP(t *testing.T, addr, token string, job *jobs.Job, n int64) {
	t.Helper()
	id := models.FormatID(job.ID)
	status, body := e2eAPIGet(t, addr, "/api/v1/jobs/"+id, token)
	if status != http.StatusOK {
		t.Fatalf("GET /api/v1/jobs/%s answered %d: %.500s", id, status, body)
	}
	var got struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		Module   string `json:"module"`
		Action   string `json:"action_name"`
		Progress struct {
			Processed int64 `json:"processed"`
			Total     int64 `json:"total"`
		} `json:"progress"`
		Details struct {
			SuccessCount int64 `json:"success_count"`
			ErrorCount   int64 `json:"error_count"`
			ResultCount  int64 `json:"result_count"`
		} `json:"details"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("GET /api/v1/jobs/%s: %v: %.500s", id, err, body)
	}
	if got.ID != id || got.Status != string(jobs.JobCompleted) || got.Module != workflows.DiagnosticModule ||
		got.Action != workflows.DiagnosticAction || got.Progress.Processed != n || got.Progress.Total != n ||
		got.Details.SuccessCount != n || got.Details.ErrorCount != 0 || got.Details.ResultCount != n {
		t.Errorf("GET /api/v1/jobs/%s shows %+v, want %s COMPLETED with %d of %d processed and %d successes", id, got, id, n, n, n)
	}

	status, body = e2eAPIGet(t, addr, "/api/v1/jobs?limit=100", token)
	if status != http.StatusOK {
		t.Fatalf("GET /api/v1/jobs answered %d: %.500s", status, body)
	}
	var list struct {
		Data []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("GET /api/v1/jobs: %v: %.500s", err, body)
	}
	for _, j := range list.Data {
		if j.ID == id {
			if j.Status != string(jobs.JobCompleted) {
				t.Errorf("GET /api/v1/jobs lists job %s %s, want COMPLETED", id, j.Status)
			}
			return
		}
	}
	t.Errorf("GET /api/v1/jobs does not list job %s: %.500s", id, body)
}

// e2eTemporal starts a Temporal server of the test's own and returns its
// frontend and namespace. The iam workers poll fixed task queues: on a
// server shared with another test running at the same time, that test's
// workers (on another database) would take this test's tasks.
func e2eTemporal(t *testing.T) (hostPort, namespace string) {
	t.Helper()
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	return ts.GetFrontendHostPort(), ts.GetDefaultNamespace()
}

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
