// Package apitest runs the API for tests: a real database, a real in-process
// Temporal server with a worker when asked, a test-only token source, and a
// client that checks every response against the OpenAPI document.
package apitest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/temporaltest"

	"iam/api"
	"iam/api/auth"
	"iam/api/jobrun"
	"iam/models/audit"
	"iam/models/hooks"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/secret/secrettest"
	"iam/models/sqldb"
	"iam/models/store"
	"iam/worker"
	"iam/workflows"
)

// Options choose what an Env runs.
type Options struct {
	// Temporal starts a worker on the shared in-process Temporal server.
	Temporal bool
	// AuditSigner signs the audit digests of the worker (and its public
	// key is the API's); AuditRetention is the worker's retention.
	AuditSigner    *audit.Signer
	AuditRetention time.Duration
	// TemporalClient, instead, is a client of a Temporal server of the
	// test's own (one it may stop); no worker is started on it.
	TemporalClient client.Client
	// Tokens replaces the test-only token source (the real OAuth server's
	// validator, say).
	Tokens auth.TokenValidator
	// OAuth is mounted under /oauth/v2 when set.
	OAuth http.Handler
	// MaxBodyBytes overrides the API's default body limit.
	MaxBodyBytes int64
	// UploadMaxBytes and UploadIdleTimeout override the API's upload limits.
	UploadMaxBytes    int64
	UploadIdleTimeout time.Duration
	// AgentRate and AgentBurst override each device's check-in rate limit.
	AgentRate  float64
	AgentBurst int
	// RegistrationsPerAddress, RegistrationsPerKey and MaxDevicesPerOrg
	// override the agent registration limits; TrustedProxies the proxies
	// whose X-Forwarded-For names the client.
	RegistrationsPerAddress int
	RegistrationsPerKey     int
	MaxDevicesPerOrg        int
	TrustedProxies          []netip.Prefix
	// AgentPackagesDir is the API's agent packages folder; unset, a
	// folder of the test's own holding a small package of every agent type
	// and platform (version 1.0.0).
	AgentPackagesDir string
	// MgmtExecutionTimeout is the worker's deadline of a management
	// execution's attempt (IAM_MGMT_EXECUTION_TIMEOUT); zero: none.
	MgmtExecutionTimeout time.Duration
	// IdempotencyLease overrides how long a request owns its
	// Idempotency-Key without renewing it.
	IdempotencyLease time.Duration
	// MgmtUploadConcurrency overrides how many management uploads the API
	// resolves at once.
	MgmtUploadConcurrency int
	// EventHookAllowPrivate are the ranges the worker's event hooks may
	// reach although private (IAM_EVENT_HOOKS_ALLOW_PRIVATE);
	// EventHookPolicy and EventHookPoll shorten the retry schedule and
	// the dispatcher's idle poll.
	EventHookAllowPrivate []netip.Prefix
	EventHookPolicy       hooks.Policy
	EventHookPoll         time.Duration
	// JobEventsPoll, JobEventsHeartbeat and JobEventStreams override the
	// job event streams' poll interval, heartbeat and bound (api.Config).
	JobEventsPoll      time.Duration
	JobEventsHeartbeat time.Duration
	JobEventStreams    int
}

// packageFiles are the packages a test's packages folder holds.
var packageFiles = []string{"DeviceAgent-windows-1.0.0.msi", "DeviceAgent-macos-1.0.0.pkg", "DeviceAgent-linux-1.0.0.tar.gz",
	"NPSExtension-1.0.0.msi", "IISModule-1.0.0.msi"}

func testPackages(t testing.TB) string {
	dir := t.TempDir()
	for _, name := range packageFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("package "+name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Env is a running API for one test.
type Env struct {
	t     testing.TB
	Store *store.Store
	// DB is the database under Store, for a test's own seeds and checks.
	DB       *bun.DB
	Temporal client.Client // nil without Options.Temporal
	Jobs     *jobrun.Launcher
	Server   *api.Server
	URL      string
	Tokens   *Tokens
	// Org is an organization made for the test; more with NewOrg.
	Org *identity.Organization
}

var shared struct {
	once   sync.Once
	server *temporaltest.TestServer
	client client.Client
	err    error
}

// sharedTemporal returns a client of the one in-process Temporal server of
// this test process, with the service's search attributes registered.
func sharedTemporal(t testing.TB) client.Client {
	shared.once.Do(func() {
		shared.server = temporaltest.NewServer()
		shared.client = shared.server.GetDefaultClient()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shared.err = worker.EnsureSearchAttributes(ctx, shared.client, shared.server.GetDefaultNamespace())
	})
	if shared.err != nil {
		t.Fatalf("temporal test server: %v", shared.err)
	}
	return shared.client
}

// TemporalAddress returns the host:port of the shared Temporal server and
// its namespace (for subprocesses).
func TemporalAddress(t testing.TB) (hostPort, namespace string) {
	sharedTemporal(t)
	return shared.server.GetFrontendHostPort(), shared.server.GetDefaultNamespace()
}

// New starts the API over db (already migrated) for the test.
func New(t testing.TB, db *bun.DB, opts Options) *Env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	e := &Env{t: t, Store: store.NewStore(db).SealBlobs(secrettest.Box), DB: db, Tokens: &Tokens{}}
	e.Jobs = &jobrun.Launcher{Store: e.Store, Log: log}
	if opts.Temporal {
		e.Temporal = sharedTemporal(t)
		e.Jobs.Client = e.Temporal
		e.Jobs.TaskQueue = fmt.Sprintf("test-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), sqldb.NewID())
		w := worker.NewOn(e.Temporal, e.Jobs.TaskQueue, worker.Deps{Store: e.Store, Secrets: secrettest.Box,
			MgmtExecutionTimeout: opts.MgmtExecutionTimeout, AuditSigner: opts.AuditSigner, AuditRetention: opts.AuditRetention,
			EventHookAllowPrivate: opts.EventHookAllowPrivate, EventHookPolicy: opts.EventHookPolicy, EventHookPoll: opts.EventHookPoll})
		if err := w.Start(); err != nil {
			t.Fatalf("start worker: %v", err)
		}
		t.Cleanup(w.Stop)
	}
	if opts.TemporalClient != nil {
		e.Temporal = opts.TemporalClient
		e.Jobs.Client = e.Temporal
		e.Jobs.TaskQueue = fmt.Sprintf("test-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), sqldb.NewID())
	}
	if opts.AgentPackagesDir == "" {
		opts.AgentPackagesDir = testPackages(t)
	}
	var tokens auth.TokenValidator = e.Tokens
	if opts.Tokens != nil {
		tokens = opts.Tokens
	}
	e.Server = api.New(api.Config{MaxBodyBytes: opts.MaxBodyBytes, UploadMaxBytes: opts.UploadMaxBytes, UploadIdleTimeout: opts.UploadIdleTimeout,
		AgentRate: opts.AgentRate, AgentBurst: opts.AgentBurst, AgentPackagesDir: opts.AgentPackagesDir,
		RegistrationsPerAddress: opts.RegistrationsPerAddress, RegistrationsPerKey: opts.RegistrationsPerKey,
		MaxDevicesPerOrg: opts.MaxDevicesPerOrg, TrustedProxies: opts.TrustedProxies,
		IdempotencyLease: opts.IdempotencyLease, MgmtUploadConcurrency: opts.MgmtUploadConcurrency,
		JobEventsPoll: opts.JobEventsPoll, JobEventsHeartbeat: opts.JobEventsHeartbeat, JobEventStreams: opts.JobEventStreams}, api.Deps{
		Store:    e.Store,
		Temporal: e.Temporal,
		Jobs:     e.Jobs,
		Tokens:   tokens,
		Log:      log,
		OAuth:    opts.OAuth,
		AuditKey: auditKey(opts.AuditSigner),
	})
	srv := httptest.NewServer(e.Server.Handler())
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	e.Org = e.NewBareOrg("Test organization")
	return e
}

// NewBareOrg creates an organization without any user, as Env.Org is (so
// that a test counts its users from zero): for a test that compares two
// organizations' runs. A test of tenant isolation takes NewOrg.
func (e *Env) NewBareOrg(name string) *identity.Organization {
	e.t.Helper()
	org := &identity.Organization{Name: name}
	if err := e.Store.Orgs.Create(context.Background(), org); err != nil {
		e.t.Fatalf("create organization: %v", err)
	}
	return org
}

// NewOrg creates another organization, the way `iam orgs create` does
// (models.Store.CreateOrganization: the organization with its first admin),
// for the tests that prove one tenant cannot reach another's data.
func (e *Env) NewOrg(name string) *identity.Organization {
	e.t.Helper()
	org := &identity.Organization{Name: name}
	admin := identity.FirstAdmin{Email: fmt.Sprintf("admin-%d@example.com", sqldb.NewID()), Password: "tenant admin password"}
	if _, _, err := e.Store.Orgs.CreateOrganization(context.Background(), org, admin); err != nil {
		e.t.Fatalf("create organization: %v", err)
	}
	return org
}

// Token mints a test token for a user of org holding scopes.
func (e *Env) Token(org *identity.Organization, scopes ...string) string {
	return e.Tokens.Mint(auth.Principal{UserID: sqldb.NewID(), OrgID: org.ID, Scopes: scopes})
}

// Response is a finished request.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test on error.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// ErrorBody decodes an error response.
func (r *Response) ErrorBody(t testing.TB) api.ErrorDetail {
	t.Helper()
	var body api.ErrorBody
	r.JSON(t, &body)
	return body.Error
}

// Request is what Do sends. Token is sent as "Service-oauthtoken <Token>"
// unless Header sets Authorization itself.
type Request struct {
	Method string
	Path   string // with query string
	Token  string
	Body   any // a []byte or string is sent as it is; anything else as JSON
	Header http.Header
}

// Do sends the request and checks the response against the OpenAPI document.
func (e *Env) Do(req Request) *Response {
	e.t.Helper()
	var body io.Reader
	contentType := ""
	switch b := req.Body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	case string:
		body = strings.NewReader(b)
	case io.Reader:
		body = b
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			e.t.Fatalf("encode body: %v", err)
		}
		body, contentType = bytes.NewReader(buf), "application/json"
	}
	hr, err := http.NewRequest(req.Method, e.URL+req.Path, body)
	if err != nil {
		e.t.Fatalf("new request: %v", err)
	}
	if contentType != "" {
		hr.Header.Set("Content-Type", contentType)
	}
	hr.Header.Set("Accept", "application/json")
	if req.Token != "" {
		hr.Header.Set("Authorization", auth.Scheme+" "+req.Token)
	}
	for k, vs := range req.Header {
		hr.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	defer func() { _ = resp.Body.Close() }() // only read: a close error tells the test nothing
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		// A stream (GET /jobs/{id}/events) lasts as long as its job: only
		// its head is read, and the connection closed.
		return &Response{Status: resp.StatusCode, Header: resp.Header}
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("read response: %v", err)
	}
	CheckResponse(e.t, hr, resp, data)
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// Get is Do for a GET.
func (e *Env) Get(path, token string) *Response {
	e.t.Helper()
	return e.Do(Request{Method: http.MethodGet, Path: path, Token: token})
}

// StartDiagnostic creates a diagnostic job in org and launches it.
func (e *Env) StartDiagnostic(org *identity.Organization, params any) *jobs.Job {
	e.t.Helper()
	job := e.CreateDiagnostic(org, params)
	if err := e.Jobs.Launch(context.Background(), job); err != nil {
		e.t.Fatalf("launch job: %v", err)
	}
	return job
}

// CreateDiagnostic writes a QUEUED diagnostic job without starting it.
func (e *Env) CreateDiagnostic(org *identity.Organization, params any) *jobs.Job {
	e.t.Helper()
	input, err := json.Marshal(params)
	if err != nil {
		e.t.Fatal(err)
	}
	job := &jobs.Job{
		OrgID:      org.ID,
		Kind:       jobs.DiagnosticJobKind,
		Module:     workflows.DiagnosticModule,
		ActionName: workflows.DiagnosticAction,
		Input:      input,
	}
	if err := e.Store.Jobs.Create(context.Background(), job); err != nil {
		e.t.Fatalf("create job: %v", err)
	}
	return job
}

// WaitJob polls the job until done reports true, failing after timeout.
func (e *Env) WaitJob(org *identity.Organization, id int64, timeout time.Duration, done func(*jobs.Job) bool) *jobs.Job {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		job, err := e.Store.Jobs.Get(context.Background(), org.ID, id)
		if err != nil {
			e.t.Fatalf("get job: %v", err)
		}
		if done(job) {
			return job
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %d still %s (%d/%d) after %s", id, job.Status, job.Processed, job.Total, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// auditKey is the public key of signer; nil without one.
func auditKey(signer *audit.Signer) ed25519.PublicKey {
	if signer == nil {
		return nil
	}
	return signer.PublicKey()
}
