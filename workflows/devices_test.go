package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/mock"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/devices"
	"iam/models/jobs"
)

func newSyncEnv(t *testing.T, input json.RawMessage) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(DeviceAccountSync, workflow.RegisterOptions{Name: DeviceSyncWorkflowName})
	env.RegisterActivity(&activities.Jobs{})
	env.RegisterActivity(&activities.Devices{})
	env.OnActivity(jobActivities.StartJob, mock.Anything, ref).
		Return(activities.JobInfo{Kind: DeviceSyncWorkflowName, Input: input}, nil)
	return env
}

// fakeAccounts answers SyncAccountsChunk over n accounts (ids 1..n), half
// linked, counting calls; it checks the settings reach every chunk.
func fakeAccounts(n int64, calls *int) func(context.Context, activities.SyncChunk) (activities.SyncChunkResult, error) {
	done := int64(0)
	return func(_ context.Context, in activities.SyncChunk) (activities.SyncChunkResult, error) {
		*calls++
		if in.Settings.AttributeValue != "employeeID" || in.Job != ref {
			return activities.SyncChunkResult{}, errors.New("wrong input")
		}
		done = min(done+int64(in.BatchSize*in.Batches), n)
		return activities.SyncChunkResult{Last: done, Done: done == n,
			Progress: jobs.JobProgress{Total: n, Processed: done, Success: done / 2}}, nil
	}
}

func syncInput(t *testing.T) json.RawMessage {
	set := devices.DefaultAccountLinkingSettings()
	set.IsEnabled, set.AttributeValue = true, "employeeID"
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDeviceAccountSync_RunsChunksToTheEnd(t *testing.T) {
	perChunk := int64(SyncBatchSize * SyncBatchesPerChunk)
	n := 2*perChunk + 3 // three chunks
	env := newSyncEnv(t, syncInput(t))
	calls := 0
	env.OnActivity(deviceActivities.SyncAccountsChunk, mock.Anything, mock.Anything).Return(fakeAccounts(n, &calls))
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobCompleted, nil
		})
	env.ExecuteWorkflow(DeviceSyncWorkflowName, JobInput{Job: ref})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", env.GetWorkflowError())
	}
	if calls != 3 {
		t.Errorf("%d chunks for %d accounts, want 3", calls, n)
	}
	if finished.Failure != "" || finished.Progress.Processed != n || finished.Progress.Success != n/2 {
		t.Errorf("finished with %+v", finished)
	}
	var p activities.Progress
	if v, err := env.QueryWorkflow(ProgressQuery); err != nil || v.Get(&p) != nil || p.Processed != n {
		t.Errorf("progress query: %+v %v", p, err)
	}
}

func TestDeviceAccountSync_ContinuesAsNew(t *testing.T) {
	n := int64(SyncBatchSize*SyncBatchesPerChunk) * (chunksPerRun + 5)
	env := newSyncEnv(t, syncInput(t))
	calls := 0
	env.OnActivity(deviceActivities.SyncAccountsChunk, mock.Anything, mock.Anything).Return(fakeAccounts(n, &calls))
	env.ExecuteWorkflow(DeviceSyncWorkflowName, JobInput{Job: ref})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow ended %v, want continue-as-new after %d chunks", err, chunksPerRun)
	}
	var next JobInput
	if err := converterFor(t).FromPayloads(can.Input, &next); err != nil || next.Resume == nil ||
		next.Resume.Progress.Processed != int64(chunksPerRun*SyncBatchSize*SyncBatchesPerChunk) || next.Resume.Next != next.Resume.Progress.Processed {
		t.Fatalf("handed state %+v (%v)", next.Resume, err)
	}
}

func TestDeviceAccountSync_BadInputFails(t *testing.T) {
	env := newSyncEnv(t, json.RawMessage(`{"group_id": "1"}`))
	var finished activities.FinishInput
	env.OnActivity(jobActivities.FinishJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishInput) (jobs.JobStatus, error) {
			finished = in
			return jobs.JobError, nil
		})
	env.ExecuteWorkflow(DeviceSyncWorkflowName, JobInput{Job: ref})
	if finished.Failure == "" {
		t.Errorf("a job whose input is not settings finished %+v", finished)
	}
}
