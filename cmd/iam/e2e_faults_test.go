package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"iam/models"
	"iam/models/dbtest"
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
	env := append(e2eAdminEnv(),
		"IAM_DATABASE_URL="+dsn,
		"IAM_SECRET_KEY="+e2eSecretKey,
		"IAM_ENCRYPTION_KEY="+e2eEncryptionKey,
		"IAM_TEMPORAL_ADDRESS="+temporalAddr,
		"IAM_TEMPORAL_NAMESPACE="+namespace,
		"IAM_HTTP_ADDR=127.0.0.1:0",
		"IAM_RECONCILE_INTERVAL=300ms",
		"IAM_RECONCILE_GRACE=0s",
	)
	serve := e2eStart(t, "serve", env, "serve")
	var apiAddr string
	e2eWaitFor(t, 30*time.Second, 20*time.Millisecond, "iam serve logs where it listens", func() (bool, string) {
		rec := serve.logLine("API listening")
		apiAddr, _ = rec["address"].(string)
		return apiAddr != "", "no \"API listening\" record yet"
	}, serve)
	e2eWaitReady(t, serve, apiAddr, 30*time.Second)
	all := []*e2eProc{serve}
	for i := 1; i <= 2; i++ {
		w := e2eStart(t, fmt.Sprintf("worker-%d", i), env, "worker")
		e2eWaitFor(t, 30*time.Second, 20*time.Millisecond, w.name+" polls", func() (bool, string) {
			return w.logLine("worker polling") != nil, "no \"worker polling\" record yet"
		}, w, serve)
		all = append(all, w)
	}

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
	if err := store.DB.NewSelect().Table("jobs").Column("id").Where("org_id = ? AND module = ?", org.ID, models.EnrollmentModule).
		Scan(t.Context(), &jobID); err != nil {
		t.Fatal(err)
	}

	// Under way: a few chunks committed, most of the file to go.
	job := e2eWaitJob(t, store.Store, org, jobID, 2*time.Minute, func(j *models.Job) bool {
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
