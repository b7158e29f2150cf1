package workflows

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/mock"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/identity"
	"iam/models/jobs"
)

func newRecomputeEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(GroupRecompute, workflow.RegisterOptions{Name: GroupRecomputeWorkflowName})
	env.RegisterActivity(&activities.Jobs{})
	env.RegisterActivity(&activities.Groups{})
	input, _ := json.Marshal(identity.RecomputeInput{GroupID: 9, RuleVersion: 2})
	env.OnActivity(jobActivities.StartJob, mock.Anything, ref).
		Return(activities.JobInfo{Kind: GroupRecomputeWorkflowName, Input: input}, nil)
	return env
}

// fakeUsers answers RecomputeGroupChunk over users 1..n, counting calls.
func fakeUsers(n int64, calls *int, stopAt int) func(context.Context, activities.RecomputeChunk) (activities.RecomputeChunkResult, error) {
	return func(_ context.Context, in activities.RecomputeChunk) (activities.RecomputeChunkResult, error) {
		*calls++
		if in.Input.GroupID != 9 || in.Input.RuleVersion != 2 {
			panic("wrong input")
		}
		if *calls == stopAt {
			return activities.RecomputeChunkResult{After: in.After, Stopped: identity.RecomputeSuperseded, Progress: in.Before}, nil
		}
		next := min(in.After+int64(in.BatchSize*in.Batches), n)
		p := in.Before
		p.Total, p.Processed, p.Success = n, next, next
		return activities.RecomputeChunkResult{After: next, Done: next == n, Progress: p}, nil
	}
}

func TestGroupRecompute_RunsChunksToTheEnd(t *testing.T) {
	perChunk := int64(RecomputeBatchSize * RecomputeBatchesPerChunk)
	users := 2*perChunk + 1 // three chunks
	env := newRecomputeEnv(t)
	calls := 0
	env.OnActivity(groupActivities.RecomputeGroupChunk, mock.Anything, mock.Anything).Return(fakeUsers(users, &calls, 0))
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobCompleted, nil
		})
	env.ExecuteWorkflow(GroupRecomputeWorkflowName, JobInput{Job: ref})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", env.GetWorkflowError())
	}
	if calls != 3 {
		t.Errorf("%d chunks for %d users, want 3", calls, users)
	}
	if finished.Failure != "" || finished.Progress.Processed != users {
		t.Errorf("finished with %+v", finished)
	}
}

func TestGroupRecompute_StopsWhenSuperseded(t *testing.T) {
	env := newRecomputeEnv(t)
	calls := 0
	env.OnActivity(groupActivities.RecomputeGroupChunk, mock.Anything, mock.Anything).Return(fakeUsers(500_000, &calls, 2))
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobError, nil
		})
	env.ExecuteWorkflow(GroupRecomputeWorkflowName, JobInput{Job: ref})
	if calls != 2 || finished.Failure != identity.RecomputeSuperseded {
		t.Errorf("%d chunks, finished with %+v; want 2 and the superseded message", calls, finished)
	}
}
