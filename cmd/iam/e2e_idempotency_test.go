package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"iam/api"
	"iam/api/auth"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
)

// e2eCrashAfterIdempotentJob is the test-only variable that makes `iam
// serve` SIGKILL itself after an idempotent request's job committed and
// before its answer is recorded or sent (api/testhook_crash.go).
const e2eCrashAfterIdempotentJob = "IAM_TEST_CRASH_AFTER_IDEMPOTENT_JOB"

// TestProduction_IdempotentUploadSurvivesKilledServe: two `iam serve`
// processes and a worker on PostgreSQL. The client uploads the flow's CSV
// with an Idempotency-Key to the first serve, which dies (SIGKILL) right
// after the job's commit, before answering. The client retries the same
// upload (a new multipart body) against the second serve: 409 while the
// dead process's lease on the key runs (30 s), then 409 "interrupted" with
// the job's Location; never a second job; the job completes with every row
// exactly once. About 45 s, most of it the lease.
func TestProduction_IdempotentUploadSurvivesKilledServe(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out an idempotency key's 30 s lease")
	}
	t.Parallel()
	dsn := dbtest.PostgresURL(t)
	e2eEmptySchema(t, dsn)
	dbEnv := []string{"IAM_DATABASE_URL=" + dsn}
	if code, _, errOut := e2eRun(t, "migrate-up", dbEnv, "migrate", "up"); code != 0 {
		t.Fatalf("iam migrate up exited %d: %s", code, errOut)
	}
	temporalAddr, namespace := e2eTemporal(t)
	env := append(append(e2eAdminEnv(), dbEnv...),
		"IAM_SECRET_KEY="+e2eSecretKey,
		"IAM_ENCRYPTION_KEY="+e2eEncryptionKey,
		"IAM_TEMPORAL_ADDRESS="+temporalAddr,
		"IAM_TEMPORAL_NAMESPACE="+namespace,
		"IAM_HTTP_ADDR=127.0.0.1:0",
		"IAM_RECONCILE_INTERVAL=300ms",
		"IAM_RECONCILE_GRACE=0s",
	)
	startServe := func(name string, extra ...string) (*e2eProc, string) {
		p := e2eStart(t, name, append(append([]string{}, env...), extra...), "serve")
		var addr string
		e2eWaitFor(t, 30*time.Second, 20*time.Millisecond, name+" logs where it listens", func() (bool, string) {
			rec := p.logLine("API listening")
			addr, _ = rec["address"].(string)
			return addr != "", "no \"API listening\" record yet"
		}, p)
		e2eWaitReady(t, p, addr, 30*time.Second)
		return p, addr
	}
	doomed, doomedAddr := startServe("serve-doomed", e2eCrashAfterIdempotentJob+"=1")
	serve, apiAddr := startServe("serve")
	worker := e2eStart(t, "worker", env, "worker")
	e2eWaitFor(t, 30*time.Second, 20*time.Millisecond, "the worker polls", func() (bool, string) {
		return worker.logLine("worker polling") != nil, "no \"worker polling\" record yet"
	}, worker, serve)

	store := e2eOpenDB(t, dsn)
	org := e2eFirstOrg(t, store.Store)
	users := e2eSeedFlowUsers(t, store, org, e2eFlowUsers)
	token := e2eIssueToken(t, []string{"IAM_DATABASE_URL=" + dsn, "IAM_SECRET_KEY=" + e2eSecretKey}, e2eFlowScopes, "--user", e2eAdminEmail)
	const key = "e2e-upload-7f3c2a"
	upload := func(addr string) (int, http.Header, []byte, error) {
		body, ct := e2eEnrollmentForm(t, addr, token)
		req, err := http.NewRequest("POST", "http://"+addr+"/api/v1/protection/quick-enrollment/upload-csv", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", auth.Scheme+" "+token)
		req.Header.Set(api.IdempotencyKeyHeader, key)
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			return 0, nil, nil, err
		}
		defer closeT(t, resp.Body)
		data, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, data, err
	}
	jobs := func() int64 {
		n, err := store.DB.NewSelect().Table("jobs").Where("org_id = ? AND module = ?", org.ID, enrollment.EnrollmentModule).Count(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	status, _, data, doomedErr := upload(doomedAddr)
	if doomedErr == nil {
		t.Fatalf("the doomed serve answered %d: %.300s; want it dead before answering", status, data)
	}
	if !doomed.waitExit(10 * time.Second) {
		t.Fatalf("the doomed serve did not die: %v", doomedErr)
	}
	if n := jobs(); n != 1 {
		t.Fatalf("%d enrollment jobs after the first request, want 1", n)
	}
	t.Logf("the first serve died after the job's commit (the client saw: %v)", doomedErr)

	// Retries against the other serve, as a client honouring Retry-After.
	began := time.Now()
	var location string
	for {
		status, header, data, err := upload(apiAddr)
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusConflict {
			t.Fatalf("retry answered %d: %.300s; want 409", status, data)
		}
		if strings.Contains(string(data), "Interrupted") {
			location = header.Get("Location")
			break
		}
		if !strings.Contains(string(data), "In Progress") || header.Get("Retry-After") == "" {
			t.Fatalf("retry answered 409 %.300s (Retry-After %q); want in progress with Retry-After", data, header.Get("Retry-After"))
		}
		if time.Since(began) > 45*time.Second {
			t.Fatalf("the key is still in progress %v after its owner died", time.Since(began))
		}
		secs, _ := time.ParseDuration(header.Get("Retry-After") + "s")
		time.Sleep(secs)
	}
	t.Logf("the retries were answered 409 in progress for %v, then interrupted with Location %s", time.Since(began).Round(time.Second), location)
	id, err := models.ParseID("id", strings.TrimPrefix(location, "/api/v1/jobs/"))
	if err != nil {
		t.Fatalf("Location %q names no job", location)
	}
	if n := jobs(); n != 1 {
		t.Fatalf("%d enrollment jobs after the retries, want 1", n)
	}
	job := e2eWaitJob(t, store.Store, org, id, 2*time.Minute, e2eFinished, serve, worker)
	e2eCheckEnrollment(t, store, org, job, users)
	if n := jobs(); n != 1 {
		t.Errorf("%d enrollment jobs at the end, want 1", n)
	}
}

// e2eEnrollmentForm is the flow's upload form (the CSV of e2eFlowCSV for the
// Email OTP and SMS OTP factor configs), with a new boundary each call.
func e2eEnrollmentForm(t *testing.T, addr, token string) (body []byte, contentType string) {
	t.Helper()
	return e2eEnrollmentFormOf(t, addr, token, e2eFlowCSVRows, e2eFlowChunkRows)
}

// e2eEnrollmentFormOf is e2eEnrollmentForm with rows rows in chunks of chunk.
func e2eEnrollmentFormOf(t *testing.T, addr, token string, rows, chunk int) (body []byte, contentType string) {
	t.Helper()
	var configs struct {
		Data []struct {
			ID   string `json:"id"`
			Type string `json:"factor_type"`
		} `json:"data"`
	}
	e2eAPIJSON(t, addr, "GET", "/api/v1/protection/authnfactor-configs", token, nil, http.StatusOK, &configs)
	var ids []string
	for _, c := range configs.Data {
		if c.Type == string(enrollment.FactorEmailOTP) || c.Type == string(enrollment.FactorSMSOTP) {
			ids = append(ids, c.ID)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("factor configs %+v: want Email OTP and SMS OTP", configs.Data)
	}
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, f := range [][2]string{{"factor_configs", strings.Join(ids, ",")}, {"file_encoding", "UTF-8"},
		{"overwrite_enrollment_data", "false"}, {"chunk_rows", fmt.Sprint(chunk)}} {
		if err := w.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := w.CreateFormFile("file", "users.csv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(e2eFlowCSV(rows)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w.FormDataContentType()
}
