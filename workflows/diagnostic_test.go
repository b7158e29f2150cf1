package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/mock"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/jobs"
)

var ref = jobs.JobRef{JobID: 42, OrgID: 7}

func newDiagnosticEnv(t *testing.T, params activities.DiagnosticParams) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Diagnostic, workflow.RegisterOptions{Name: DiagnosticWorkflowName})
	env.RegisterActivity(&activities.Jobs{})
	env.RegisterActivity(&activities.Diagnostics{})
	input, _ := json.Marshal(params)
	env.OnActivity(jobActivities.StartJob, mock.Anything, ref).
		Return(activities.JobInfo{Kind: DiagnosticWorkflowName, Input: input}, nil)
	return env
}

// chunkRunner answers RunDiagnosticChunk as the real activity would, and
// counts its calls.
func chunkRunner(calls *int) func(context.Context, activities.DiagnosticChunk) (activities.Progress, error) {
	return func(_ context.Context, in activities.DiagnosticChunk) (activities.Progress, error) {
		*calls++
		p := in.Before
		p.Processed, p.Total = in.To, in.Params.Items
		p.Success += in.To - in.From
		return p, nil
	}
}

func TestDiagnostic_ProcessesEveryChunkAndFinishes(t *testing.T) {
	env := newDiagnosticEnv(t, activities.DiagnosticParams{Items: 250, ChunkSize: 100})
	calls := 0
	env.OnActivity(diagnosticActivities.RunDiagnosticChunk, mock.Anything, mock.Anything).Return(chunkRunner(&calls))
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobCompleted, nil
		})

	env.ExecuteWorkflow(DiagnosticWorkflowName, JobInput{Job: ref})

	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if calls != 3 {
		t.Errorf("chunk activity ran %d times, want 3", calls)
	}
	want := activities.Progress{Processed: 250, Total: 250, Success: 250}
	if finished.Progress != want || finished.Failure != "" {
		t.Errorf("finished with %+v, want progress %+v and no failure", finished, want)
	}
	val, err := env.QueryWorkflow(ProgressQuery)
	if err != nil {
		t.Fatal(err)
	}
	var p activities.Progress
	if err := val.Get(&p); err != nil || p != want {
		t.Errorf("progress query = %+v (%v), want %+v", p, err, want)
	}
}

func TestDiagnostic_ContinuesAsNewWithItsState(t *testing.T) {
	env := newDiagnosticEnv(t, activities.DiagnosticParams{Items: chunksPerRun + 50, ChunkSize: 1})
	calls := 0
	env.OnActivity(diagnosticActivities.RunDiagnosticChunk, mock.Anything, mock.Anything).Return(chunkRunner(&calls))

	env.ExecuteWorkflow(DiagnosticWorkflowName, JobInput{Job: ref})

	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	if calls != chunksPerRun {
		t.Errorf("ran %d chunks before continuing, want %d", calls, chunksPerRun)
	}
	var next JobInput
	if err := (converterFor(t)).FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Resume == nil || next.Resume.Next != chunksPerRun || next.Resume.Progress.Processed != chunksPerRun {
		t.Fatalf("handed over %+v, want next=%d", next.Resume, chunksPerRun)
	}

	// The next run picks up where the first stopped, without starting the job again.
	env2 := newDiagnosticEnv(t, activities.DiagnosticParams{})
	calls2 := 0
	env2.OnActivity(diagnosticActivities.RunDiagnosticChunk, mock.Anything, mock.Anything).Return(chunkRunner(&calls2))
	var finished activities.FinishInput
	env2.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobCompleted, nil
		})
	env2.ExecuteWorkflow(DiagnosticWorkflowName, next)
	if err := env2.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if calls2 != 50 || finished.Progress.Processed != chunksPerRun+50 || finished.Progress.Success != chunksPerRun+50 {
		t.Errorf("second run: %d chunks, finished %+v", calls2, finished.Progress)
	}
	env2.AssertNotCalled(t, "StartJob", mock.Anything, mock.Anything)
}

func TestDiagnostic_FailedChunkEndsTheJobInError(t *testing.T) {
	env := newDiagnosticEnv(t, activities.DiagnosticParams{Items: 10})
	env.OnActivity(diagnosticActivities.RunDiagnosticChunk, mock.Anything, mock.Anything).
		Return(activities.Progress{}, temporal.NewNonRetryableApplicationError("the input is broken", activities.ErrInvalid, nil))
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobError, nil
		})

	env.ExecuteWorkflow(DiagnosticWorkflowName, JobInput{Job: ref})

	if env.GetWorkflowError() == nil {
		t.Fatal("want the workflow to fail")
	}
	if finished.Failure != "the input is broken" {
		t.Errorf("job finished with failure %q", finished.Failure)
	}
}

func TestDiagnostic_DeletedJobStopsQuietly(t *testing.T) {
	env := newDiagnosticEnv(t, activities.DiagnosticParams{Items: 10})
	env.OnActivity(diagnosticActivities.RunDiagnosticChunk, mock.Anything, mock.Anything).
		Return(activities.Progress{}, temporal.NewNonRetryableApplicationError("gone", activities.ErrJobGone, nil))

	env.ExecuteWorkflow(DiagnosticWorkflowName, JobInput{Job: ref})

	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("want a quiet end, got %v", env.GetWorkflowError())
	}
	env.AssertNotCalled(t, "FinishJob", mock.Anything, mock.Anything)
}
