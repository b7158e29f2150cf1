package jobrun_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"iam/activities"
	"iam/api/apitest"
	"iam/api/jobrun"
	"iam/models"
	"iam/models/dbtest"
	jobsmodel "iam/models/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// A job accepted while Temporal is unreachable stays QUEUED, and the
// reconciler starts it once Temporal answers; a second pass starts nothing
// twice.
func TestReconciler_StartsJobsWhoseStartWasLost(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	ctx := context.Background()

	down, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	offline := &jobrun.Launcher{Client: down, Store: env.Store, Log: slog.New(slog.DiscardHandler), TaskQueue: env.Jobs.TaskQueue}

	jobs := make([]*jobsmodel.Job, 3)
	for i := range jobs {
		jobs[i] = env.CreateDiagnostic(env.Org, activities.DiagnosticParams{Items: 5})
		shortCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := offline.Launch(shortCtx, jobs[i]); err == nil {
			t.Fatal("launching against an unreachable Temporal must fail")
		}
		cancel()
	}
	offlineRec := &jobrun.Reconciler{Launcher: offline, Interval: time.Second}
	shortCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if n, err := offlineRec.Pass(shortCtx); err == nil || n != 0 {
		t.Errorf("a pass with Temporal down: %d started, err %v; want an error", n, err)
	}
	cancel()
	time.Sleep(500 * time.Millisecond)
	for _, j := range jobs {
		if got, _ := env.Store.Jobs.Get(ctx, env.Org.ID, j.ID); got.Status != jobsmodel.JobQueued {
			t.Fatalf("job %d is %s while Temporal is down, want QUEUED", j.ID, got.Status)
		}
	}

	rec := &jobrun.Reconciler{Launcher: env.Jobs, Interval: 100 * time.Millisecond, Grace: 0}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go rec.Run(runCtx)
	for _, j := range jobs {
		got := env.WaitJob(env.Org, j.ID, 60*time.Second, func(j *jobsmodel.Job) bool { return j.Status.Finished() })
		if got.Status != jobsmodel.JobCompleted || got.Processed != 5 {
			t.Errorf("job %d ended %s at %d/5", j.ID, got.Status, got.Processed)
		}
	}
	// Launching a started job again is not an error and runs nothing twice.
	if err := env.Jobs.Launch(ctx, jobs[0]); err != nil {
		t.Errorf("relaunch: %v", err)
	}
	if n, err := rec.Pass(ctx); err != nil || n != 0 {
		t.Errorf("a pass with nothing queued started %d (%v)", n, err)
	}
}

// A job has one workflow, "job-<id>": starting it again, while it runs or
// after it ended, is refused by Temporal and starts no second workflow.
func TestLaunch_OneWorkflowPerJob(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	ctx := context.Background()
	job := env.CreateDiagnostic(env.Org, activities.DiagnosticParams{Items: 20, ChunkSize: 2, DelayMillis: 20})
	for range 3 { // the API's start, then the reconciler's twice
		if err := env.Jobs.Launch(ctx, job); err != nil {
			t.Fatalf("launch: %v", err)
		}
	}
	got := env.WaitJob(env.Org, job.ID, 60*time.Second, func(j *jobsmodel.Job) bool { return j.Status.Finished() })
	if got.Status != jobsmodel.JobCompleted || got.Processed != 20 {
		t.Fatalf("job ended %s at %d/20", got.Status, got.Processed)
	}
	if err := env.Jobs.Launch(ctx, job); err != nil {
		t.Fatalf("launch after the end: %v", err)
	}

	wid := jobsmodel.JobWorkflowID(job.ID)
	if wid != "job-"+models.FormatID(job.ID) {
		t.Errorf("workflow id %q, want job-<id>", wid)
	}
	// The job row ends in the workflow's last activity, a moment before
	// the workflow itself completes: wait for it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		d, err := env.Temporal.DescribeWorkflowExecution(ctx, wid, "")
		if err != nil {
			t.Fatalf("describe %s: %v", wid, err)
		}
		st := d.GetWorkflowExecutionInfo().GetStatus()
		if st == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			break
		}
		if st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || time.Now().After(deadline) {
			t.Fatalf("%s is %s, want completed", wid, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every execution of the job, whatever its id, carries its job id.
	query := fmt.Sprintf("IamJobId = %q", models.FormatID(job.ID))
	var ids []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids = ids[:0]
		resp, err := env.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId()+"/"+e.GetExecution().GetRunId())
		}
		if len(ids) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(ids) != 1 || !strings.HasPrefix(ids[0], wid+"/") {
		t.Errorf("the job has executions %v, want one of %s", ids, wid)
	}
}
