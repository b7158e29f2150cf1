package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/jobs"
	"iam/models/management"
)

func newMgmtEnv(t *testing.T, deadline time.Time) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ManagementExecution, workflow.RegisterOptions{Name: ManagementWorkflowName})
	env.RegisterActivity(&activities.Jobs{})
	env.RegisterActivity(&activities.Management{})
	env.OnActivity(jobActivities.StartJob, mock.Anything, ref).Return(activities.JobInfo{Kind: ManagementWorkflowName}, nil)
	env.OnActivity(mgmtActivities.StartExecutionAttempt, mock.Anything, ref).Return(
		activities.MgmtAttempt{ExecutionID: 77, Attempt: 2, Action: "delete-users", Deadline: deadline,
			Progress: activities.Progress{Total: 25_000}}, nil)
	return env
}

// fakeTargets answers ExecuteChunk over seqs 1..n, every seventh failing.
func fakeTargets(n int64, calls *int, pause time.Duration) func(context.Context, activities.MgmtChunk) (activities.MgmtChunkResult, error) {
	return func(_ context.Context, in activities.MgmtChunk) (activities.MgmtChunkResult, error) {
		*calls++
		if in.ExecutionID != 77 || in.Attempt != 2 {
			panic("wrong attempt")
		}
		time.Sleep(pause)
		next := min(in.After+int64(in.BatchSize*in.Batches), n)
		p := activities.Progress{Total: n, Processed: next, Failed: next / 7}
		p.Success = next - p.Failed
		return activities.MgmtChunkResult{After: next, Done: next == n, Progress: p}, nil
	}
}

func TestManagementExecution_RunsChunksAndCompletes(t *testing.T) {
	env := newMgmtEnv(t, time.Time{})
	calls := 0
	env.OnActivity(mgmtActivities.ExecuteChunk, mock.Anything, mock.Anything).Return(fakeTargets(25_000, &calls, 0))
	var ended activities.MgmtFinish
	env.OnActivity(mgmtActivities.FinishExecutionAttempt, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MgmtFinish) (activities.Progress, error) {
			ended = in
			return activities.Progress{Total: 12_000, Processed: 12_000, Success: 10_286, Failed: 1714}, nil
		})
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobWarning, nil
		})
	env.ExecuteWorkflow(ManagementWorkflowName, JobInput{Job: ref})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", env.GetWorkflowError())
	}
	if calls != 3 { // 10,000 a chunk
		t.Errorf("%d chunks for 25,000 users, want 3", calls)
	}
	if ended.Status != string(management.ExecCompleted) || ended.ExecutionID != 77 || ended.Attempt != 2 {
		t.Errorf("attempt ended with %+v", ended)
	}
	if finished.Failure != "" || finished.Progress.Failed != 1714 || finished.Progress.Processed != 12_000 {
		t.Errorf("job finished with %+v", finished)
	}
}

func TestManagementExecution_TimesOut(t *testing.T) {
	start := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	env := newMgmtEnv(t, start.Add(90*time.Second))
	env.SetStartTime(start)
	calls := 0
	// Each chunk takes a minute of the test's clock: the deadline passes
	// after the second.
	env.OnActivity(mgmtActivities.ExecuteChunk, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.MgmtChunk) (activities.MgmtChunkResult, error) {
			return fakeTargets(25_000, &calls, 0)(ctx, in)
		}).After(time.Minute)
	var ended activities.MgmtFinish
	env.OnActivity(mgmtActivities.FinishExecutionAttempt, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MgmtFinish) (activities.Progress, error) {
			ended = in
			return activities.Progress{Total: 12_000, Processed: 12_000, Success: 8572, Failed: 3428}, nil
		})
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobWarning, nil
		})
	env.ExecuteWorkflow(ManagementWorkflowName, JobInput{Job: ref})
	if env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", env.GetWorkflowError())
	}
	if calls != 2 || ended.Status != string(management.ExecTimeOut) {
		t.Errorf("%d chunks, attempt ended %+v; want 2 and time_out", calls, ended)
	}
	if finished.Progress.Failed != 3428 {
		t.Errorf("job finished with %+v: the unreached users count as failed", finished)
	}
}

func TestManagementExecution_JobDeletedInterrupts(t *testing.T) {
	env := newMgmtEnv(t, time.Time{})
	env.OnActivity(mgmtActivities.ExecuteChunk, mock.Anything, mock.Anything).Return(
		activities.MgmtChunkResult{}, temporal.NewNonRetryableApplicationError("the job does not exist or was deleted", activities.ErrJobGone, nil))
	var ended activities.MgmtFinish
	env.OnActivity(mgmtActivities.FinishExecutionAttempt, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MgmtFinish) (activities.Progress, error) {
			ended = in
			return activities.Progress{}, nil
		})
	jobFinished := false
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.FinishInput) (jobs.JobStatus, error) {
			jobFinished = true
			return jobs.JobError, nil
		})
	env.ExecuteWorkflow(ManagementWorkflowName, JobInput{Job: ref})
	if env.GetWorkflowError() != nil {
		t.Fatalf("a deleted job ends the workflow quietly: %v", env.GetWorkflowError())
	}
	if ended.Status != string(management.ExecInterrupted) || jobFinished {
		t.Errorf("attempt ended %+v, job finished %v; want interrupted and no job write", ended, jobFinished)
	}
}

func TestManagementExecution_CancelInterrupts(t *testing.T) {
	env := newMgmtEnv(t, time.Time{})
	env.OnActivity(mgmtActivities.ExecuteChunk, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.MgmtChunk) (activities.MgmtChunkResult, error) {
			calls := 0
			return fakeTargets(25_000, &calls, 0)(ctx, in)
		}).After(time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 90*time.Second)
	var ended activities.MgmtFinish
	env.OnActivity(mgmtActivities.FinishExecutionAttempt, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MgmtFinish) (activities.Progress, error) {
			ended = in
			return activities.Progress{}, nil
		})
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobError, nil
		})
	env.ExecuteWorkflow(ManagementWorkflowName, JobInput{Job: ref})
	if ended.Status != string(management.ExecInterrupted) || finished.Failure != "the job was cancelled" {
		t.Errorf("attempt ended %+v, job finished %+v; want interrupted and cancelled", ended, finished)
	}
}

// A large upload's resolving job reads its rows in chunks of consecutive
// row numbers, each from where the last ended, until a chunk says the
// upload is resolved; the job ends by the counts.
func TestManagementUploadResolve_ChunksUntilResolved(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ManagementUploadResolve, workflow.RegisterOptions{Name: ManagementResolveWorkflowName})
	env.RegisterActivity(&activities.Jobs{})
	env.RegisterActivity(&activities.Management{})
	input, _ := json.Marshal(management.UploadResolveInput{UploadID: 5, BlobID: 6, Encoding: "UTF-8", DataOffset: 20})
	env.OnActivity(jobActivities.StartJob, mock.Anything, ref).Return(activities.JobInfo{Kind: ManagementResolveWorkflowName, Input: input}, nil)
	const rows = 4500
	var froms []int64
	env.OnActivity(mgmtActivities.ResolveUploadRows, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MgmtResolveChunk) (activities.MgmtResolveResult, error) {
			if in.Params.UploadID != 5 || in.Params.BlobID != 6 || in.Rows != MgmtResolveRows {
				panic("wrong chunk input")
			}
			froms = append(froms, in.From)
			next := min(in.From+int64(in.Rows), rows+1)
			p := in.Before
			p.Total, p.Processed, p.Success = rows, next-1, next-1
			return activities.MgmtResolveResult{Next: next, Done: next > rows, Progress: p}, nil
		})
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobCompleted, nil
		})
	env.ExecuteWorkflow(ManagementResolveWorkflowName, JobInput{Job: ref})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", env.GetWorkflowError())
	}
	if fmt.Sprint(froms) != "[1 2001 4001]" {
		t.Errorf("chunks from rows %v, want [1 2001 4001]", froms)
	}
	if finished.Failure != "" || finished.Progress.Processed != rows || finished.Progress.Total != rows {
		t.Errorf("job finished with %+v", finished)
	}
}
