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
	"iam/models/enrollment"
	"iam/models/jobs"
)

func newEnrollEnv(t *testing.T, name string, fn any, input any) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name})
	env.RegisterActivity(&activities.Jobs{})
	env.RegisterActivity(&activities.Enrollment{})
	raw, _ := json.Marshal(input)
	env.OnActivity(jobActivities.StartJob, mock.Anything, ref).Return(activities.JobInfo{Kind: name, Input: raw}, nil)
	return env
}

// csvChunks answers EnrollCSVRows as the real activity would for a file of
// rows rows in chunks of size, counting its calls.
func csvChunks(rows, size int64, calls *int) func(context.Context, activities.EnrollCSVChunk) (activities.EnrollChunkResult, error) {
	return func(_ context.Context, in activities.EnrollCSVChunk) (activities.EnrollChunkResult, error) {
		*calls++
		next := min(in.From+size, rows+1)
		p := in.Before
		p.Processed, p.Success = next-1, p.Success+(next-in.From)
		return activities.EnrollChunkResult{Progress: p, Next: next, Done: next > rows}, nil
	}
}

func TestEnrollCSV_CountsThenWorksThroughChunks(t *testing.T) {
	env := newEnrollEnv(t, EnrollCSVWorkflowName, EnrollCSV, enrollment.EnrollCSVInput{BlobID: 9, Encoding: "UTF-8", ChunkRows: 100})
	env.OnActivity(enrollActivities.CountEnrollCSVRows, mock.Anything, mock.Anything).Return(activities.Progress{Total: 250}, nil)
	calls := 0
	var froms []int64
	env.OnActivity(enrollActivities.EnrollCSVRows, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.EnrollCSVChunk) (activities.EnrollChunkResult, error) {
			froms = append(froms, in.From)
			if in.Params.BlobID != 9 || in.Before.Total != 250 {
				return activities.EnrollChunkResult{}, errors.New("the chunk lacks the job's input or total")
			}
			return csvChunks(250, 100, &calls)(ctx, in)
		})
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobCompleted, nil
		})

	env.ExecuteWorkflow(EnrollCSVWorkflowName, JobInput{Job: ref})

	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", env.GetWorkflowError())
	}
	if calls != 3 || froms[0] != 1 || froms[1] != 101 || froms[2] != 201 {
		t.Errorf("chunks from %v", froms)
	}
	want := activities.Progress{Processed: 250, Total: 250, Success: 250}
	if finished.Progress != want {
		t.Errorf("finished with %+v, want %+v", finished.Progress, want)
	}
	val, err := env.QueryWorkflow(ProgressQuery)
	var p activities.Progress
	if err != nil || val.Get(&p) != nil || p != want {
		t.Errorf("progress query %+v (%v)", p, err)
	}
}

func TestEnrollCSV_ContinuesAsNewWithoutCountingAgain(t *testing.T) {
	rows := int64(chunksPerRun*10 + 5)
	env := newEnrollEnv(t, EnrollCSVWorkflowName, EnrollCSV, enrollment.EnrollCSVInput{ChunkRows: 10})
	env.OnActivity(enrollActivities.CountEnrollCSVRows, mock.Anything, mock.Anything).Return(activities.Progress{Total: rows}, nil)
	calls := 0
	env.OnActivity(enrollActivities.EnrollCSVRows, mock.Anything, mock.Anything).Return(csvChunks(rows, 10, &calls))
	env.ExecuteWorkflow(EnrollCSVWorkflowName, JobInput{Job: ref})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	var next JobInput
	if err := converterFor(t).FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Resume == nil || next.Resume.Next < 2 || next.Resume.Progress.Total != rows {
		t.Fatalf("handed over %+v", next.Resume)
	}

	env2 := newEnrollEnv(t, EnrollCSVWorkflowName, EnrollCSV, enrollment.EnrollCSVInput{ChunkRows: 10})
	calls2 := 0
	env2.OnActivity(enrollActivities.EnrollCSVRows, mock.Anything, mock.Anything).Return(csvChunks(rows, 10, &calls2))
	env2.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(jobs.JobCompleted, nil)
	env2.ExecuteWorkflow(EnrollCSVWorkflowName, next)
	if err := env2.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	env2.AssertNotCalled(t, "CountEnrollCSVRows", mock.Anything, mock.Anything)
	env2.AssertNotCalled(t, "StartJob", mock.Anything, mock.Anything)
	if int64(calls+calls2) != rows/10+1 {
		t.Errorf("%d + %d chunks for %d rows", calls, calls2, rows)
	}
}

func TestEnrollCSV_BrokenInputEndsInError(t *testing.T) {
	env := newEnrollEnv(t, EnrollCSVWorkflowName, EnrollCSV, enrollment.EnrollCSVInput{})
	env.OnActivity(enrollActivities.CountEnrollCSVRows, mock.Anything, mock.Anything).
		Return(activities.Progress{}, temporal.NewNonRetryableApplicationError("unknown file encoding", activities.ErrInvalid, nil))
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobError, nil
		})
	env.ExecuteWorkflow(EnrollCSVWorkflowName, JobInput{Job: ref})
	if env.GetWorkflowError() == nil || finished.Failure != "unknown file encoding" {
		t.Errorf("workflow %v, job failure %q", env.GetWorkflowError(), finished.Failure)
	}
}

func TestEnrollCSV_DeletedJobStopsQuietly(t *testing.T) {
	env := newEnrollEnv(t, EnrollCSVWorkflowName, EnrollCSV, enrollment.EnrollCSVInput{})
	env.OnActivity(enrollActivities.CountEnrollCSVRows, mock.Anything, mock.Anything).Return(activities.Progress{Total: 10}, nil)
	env.OnActivity(enrollActivities.EnrollCSVRows, mock.Anything, mock.Anything).
		Return(activities.EnrollChunkResult{}, temporal.NewNonRetryableApplicationError("gone", activities.ErrJobGone, nil))
	env.ExecuteWorkflow(EnrollCSVWorkflowName, JobInput{Job: ref})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("want a quiet end, got %v", env.GetWorkflowError())
	}
	env.AssertNotCalled(t, "FinishJob", mock.Anything, mock.Anything)
}

func TestEnrollSmartCards_ChunksByEntryIndex(t *testing.T) {
	env := newEnrollEnv(t, EnrollSmartCardsWorkflowName, EnrollSmartCards, enrollment.EnrollSmartCardsInput{Entries: 25, ChunkRows: 10})
	var spans [][2]int64
	env.OnActivity(enrollActivities.EnrollSmartCards, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EnrollSmartCardChunk) (activities.EnrollChunkResult, error) {
			spans = append(spans, [2]int64{in.From, in.To})
			to := min(in.To, 25)
			p := in.Before
			p.Processed, p.Total, p.Failed = to, 25, p.Failed+(to-in.From)
			return activities.EnrollChunkResult{Progress: p, Next: to, Done: to >= 25}, nil
		})
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobError, nil
		})
	env.ExecuteWorkflow(EnrollSmartCardsWorkflowName, JobInput{Job: ref})
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if len(spans) != 3 || spans[0] != [2]int64{0, 10} || spans[2] != [2]int64{20, 30} || finished.Progress.Failed != 25 {
		t.Errorf("spans %v, finished %+v", spans, finished.Progress)
	}
}
