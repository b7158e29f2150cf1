package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"iam/deploy/devserver"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/jobs"
	"iam/workflows"
)

// e2eRestartRows is the size of the enrollment the PostgreSQL restart hits.
const (
	e2eRestartRows  = 300_000
	e2eRestartChunk = 5_000
)

// TestProduction_EnrollmentSurvivesPostgresRestart (LONG: about 1–3 min,
// skipped with -short): `iam serve` and two `iam worker` processes of the
// production build on a PostgreSQL cluster of the test's own. A 300,000-row
// enrollment is uploaded; once it is under way the server is restarted (a
// fast stop: every session ended, as an operator's restart or a failover
// does; started again 3 s later). The job completes, with every row
// processed exactly once: one result per row, in row order, each the one
// its data calls for, and one enrollment per factor of every good row.
func TestProduction_EnrollmentSurvivesPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("a 300,000-row enrollment across a PostgreSQL restart")
	}
	t.Parallel()
	cluster := dbtest.NewCluster(t) // migrated, as `iam migrate up` leaves it
	dsn := cluster.URL()
	temporalAddr, namespace := e2eTemporal(t)
	shape := e2eStartShape(t, dsn, temporalAddr, namespace)
	serve, apiAddr := shape.serve, shape.apiAddr
	all := append([]*e2eProc{serve}, shape.startWorkers(2)...)

	store := e2eOpenDB(t, dsn)
	org := e2eFirstOrg(t, store.Store)
	began := time.Now()
	users := e2eSeedFlowUsers(t, store, org, e2eRestartRows)
	t.Logf("seeded %d users in %v", e2eRestartRows, time.Since(began).Round(time.Millisecond))
	token := e2eIssueToken(t, []string{"IAM_DATABASE_URL=" + dsn, "IAM_SECRET_KEY=" + e2eSecretKey}, e2eFlowScopes, "--user", e2eAdminEmail)
	body, ct := e2eEnrollmentFormOf(t, apiAddr, token, e2eRestartRows, e2eRestartChunk)
	status, data := e2eAPIDo(t, apiAddr, "POST", "/api/v1/protection/quick-enrollment/upload-csv", token, ct, body)
	if status != http.StatusAccepted {
		t.Fatalf("upload-csv answered %d: %.500s", status, data)
	}
	var jobID int64
	if err := store.DB.NewSelect().Table("jobs").Column("id").Where("org_id = ? AND module = ?", org.ID, enrollment.EnrollmentModule).
		Scan(t.Context(), &jobID); err != nil {
		t.Fatal(err)
	}

	// Under way: a few chunks committed, most of the file to go.
	job := e2eWaitJob(t, store.Store, org, jobID, 2*time.Minute, func(j *jobs.Job) bool {
		return j.Processed >= 4*e2eRestartChunk || j.Status.Finished()
	}, all...)
	if job.Status.Finished() || job.Processed > e2eRestartRows/2 {
		t.Fatalf("the job was %s at %d/%d before the restart: make it longer", job.Status, job.Processed, job.Total)
	}
	cluster.Stop(false)
	t.Logf("PostgreSQL stopped (fast) with the job at %d/%d", job.Processed, job.Total)
	time.Sleep(3 * time.Second)
	cluster.Start()
	restarted := time.Now()
	// The test's own connections died with the server too: a read that
	// fails on one is tried again on the next poll.
	e2eWaitFor(t, 5*time.Minute, 200*time.Millisecond, "the job finishes after the restart", func() (bool, string) {
		j, err := store.Jobs.Get(t.Context(), org.ID, jobID)
		if err != nil {
			return false, err.Error()
		}
		job = j
		return j.Status.Finished(), fmt.Sprintf("%s %d/%d", j.Status, j.Processed, j.Total)
	}, all...)
	t.Logf("the job finished %v after PostgreSQL was back (%v in all)", time.Since(restarted).Round(time.Millisecond), time.Since(began).Round(time.Second))
	e2eCheckEnrollmentOf(t, store, org, job, users, e2eRestartRows)
	for _, p := range all {
		if p.exited() {
			t.Errorf("%s exited across the restart: %s", p.name, p.status())
		}
	}
}

// e2eOutageRows is the size of the enrollment the Temporal outage hits.
const (
	e2eOutageRows  = 60_000
	e2eOutageChunk = 2_000
	e2eOutageFor   = 30 * time.Second
)

// TestProduction_EnrollmentSurvivesTemporalOutage (LONG: about 1–2 min,
// skipped with -short): `iam serve` and two `iam worker` processes of the
// production build on PostgreSQL, against a Temporal server (SQLite, a
// fixed port) that is stopped for 30 s in the middle of a 60,000-row
// enrollment and started again on the same data. Meanwhile `/readyz` says
// Temporal is down (503, checks.temporal "unavailable") and an upload is
// accepted (202, QUEUED). Afterwards the first job completes with every row
// exactly once, and the upload accepted during the outage starts by itself
// (the reconciler) and completes.
func TestProduction_EnrollmentSurvivesTemporalOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 30 s Temporal outage")
	}
	t.Parallel()
	dsn := dbtest.PostgresURL(t)
	e2eEmptySchema(t, dsn)
	dbEnv := []string{"IAM_DATABASE_URL=" + dsn}
	if code, _, errOut := e2eRun(t, "migrate-up", dbEnv, "migrate", "up"); code != 0 {
		t.Fatalf("iam migrate up exited %d: %s", code, errOut)
	}
	port := e2eFreeTCPPort(t)
	temporalCfg := devserver.Config{DataDir: t.TempDir(), FrontendPort: port, DisableUI: true,
		SearchAttributes: workflows.SearchAttributes()}
	startTemporal := func() *devserver.Server {
		ts, err := devserver.Start(context.Background(), temporalCfg)
		if err != nil {
			t.Fatalf("start Temporal on port %d: %v", port, err)
		}
		return ts
	}
	ts := startTemporal()
	t.Cleanup(func() {
		if err := ts.Stop(); err != nil {
			t.Errorf("stop Temporal: %v", err)
		}
	})
	shape := e2eStartShape(t, dsn, ts.FrontendAddress(), ts.Namespace())
	serve, apiAddr := shape.serve, shape.apiAddr
	all := append([]*e2eProc{serve}, shape.startWorkers(2)...)

	store := e2eOpenDB(t, dsn)
	org := e2eFirstOrg(t, store.Store)
	users := e2eSeedFlowUsers(t, store, org, e2eOutageRows)
	token := e2eIssueToken(t, []string{"IAM_DATABASE_URL=" + dsn, "IAM_SECRET_KEY=" + e2eSecretKey}, e2eFlowScopes, "--user", e2eAdminEmail)
	upload := func(rows, chunk int) (id int64, status string) {
		body, ct := e2eEnrollmentFormOf(t, apiAddr, token, rows, chunk)
		code, data := e2eAPIDo(t, apiAddr, "POST", "/api/v1/protection/quick-enrollment/upload-csv", token, ct, body)
		if code != http.StatusAccepted {
			t.Fatalf("upload-csv answered %d: %.500s", code, data)
		}
		var acc struct {
			Data struct{ ID, Status string } `json:"data"`
		}
		if err := json.Unmarshal(data, &acc); err != nil {
			t.Fatal(err)
		}
		id, err := models.ParseID("id", acc.Data.ID)
		if err != nil {
			t.Fatal(err)
		}
		return id, acc.Data.Status
	}
	first, _ := upload(e2eOutageRows, e2eOutageChunk)
	job := e2eWaitJob(t, store.Store, org, first, 2*time.Minute, func(j *jobs.Job) bool {
		return j.Processed >= 3*e2eOutageChunk || j.Status.Finished()
	}, all...)
	if job.Status.Finished() || job.Processed > e2eOutageRows/2 {
		t.Fatalf("the job was %s at %d/%d before the outage: make it longer", job.Status, job.Processed, job.Total)
	}
	if err := ts.Stop(); err != nil {
		t.Fatalf("stop Temporal: %v", err)
	}
	stopped := time.Now()
	t.Logf("Temporal stopped with the job at %d/%d", job.Processed, job.Total)

	e2eWaitFor(t, 20*time.Second, 200*time.Millisecond, "/readyz says Temporal is down", func() (bool, string) {
		code, data := e2eHTTPGet("http://" + apiAddr + "/readyz")
		var r struct {
			Checks map[string]string `json:"checks"`
		}
		_ = json.Unmarshal(data, &r)
		return code == http.StatusServiceUnavailable && r.Checks["temporal"] == "unavailable" && r.Checks["database"] == "ok",
			fmt.Sprintf("%d %s", code, data)
	}, all...)
	during, status := upload(1_000, 500)
	if status != string(jobs.JobQueued) {
		t.Errorf("an upload during the outage is %s, want QUEUED", status)
	}
	time.Sleep(time.Until(stopped.Add(e2eOutageFor)))
	ts = startTemporal()
	back := time.Now()
	t.Logf("Temporal started again after %v", back.Sub(stopped).Round(time.Millisecond))

	job = e2eWaitJob(t, store.Store, org, first, 5*time.Minute, e2eFinished, all...)
	t.Logf("the job finished %v after Temporal was back", time.Since(back).Round(time.Millisecond))
	e2eCheckEnrollmentOf(t, store, org, job, users, e2eOutageRows)
	queued := e2eWaitJob(t, store.Store, org, during, 2*time.Minute, e2eFinished, all...)
	if queued.Processed != 1_000 || queued.Total != 1_000 {
		t.Errorf("the upload accepted during the outage ended %s at %d/%d, want 1000/1000", queued.Status, queued.Processed, queued.Total)
	}
	if code, data := e2eHTTPGet("http://" + apiAddr + "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the outage: %d %s", code, data)
	}
}

// e2eFreeTCPPort is a port free on 127.0.0.1 a moment ago.
func e2eFreeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, ln)
	return ln.Addr().(*net.TCPAddr).Port
}
