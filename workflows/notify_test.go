package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
)

func newNotifyEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(NotificationRun, workflow.RegisterOptions{Name: NotifyWorkflowName})
	env.RegisterActivity(&activities.Notifications{})
	return env
}

// chunkCalls records the send steps a run made.
type chunkCalls struct {
	mu     sync.Mutex
	froms  []int64
	queues map[string]int
	at     []time.Duration // workflow time of each call, from the start
}

func TestNotificationRun_SendsChunksOnTheNotifyQueueAndRetriesLater(t *testing.T) {
	env := newNotifyEnv(t)
	scheduled := time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)
	if err := env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(scheduledStartTime.ValueSet(scheduled))); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 2, 9, 30, 2, 0, time.UTC)
	env.SetStartTime(start)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{TaskQueue: TaskQueue})
	var prepared activities.PrepareRunInput
	env.OnActivity(notifyActivities.PrepareNotificationRun, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PrepareRunInput) (activities.RunInfo, error) {
			prepared = in
			return activities.RunInfo{RunID: 99, Total: 1200, Status: activities.RunStatusRunning}, nil
		})
	calls := &chunkCalls{queues: map[string]int{}}
	now := env.Now
	env.OnActivity(notifyActivities.SendNotificationChunk, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.ChunkInput) (activities.ChunkResult, error) {
			calls.mu.Lock()
			defer calls.mu.Unlock()
			calls.froms = append(calls.froms, in.From)
			calls.queues[activity.GetInfo(ctx).TaskQueue]++
			calls.at = append(calls.at, now().Sub(start))
			n := in.To - in.From
			if in.From == 501 && len(calls.froms) <= 3 { // the second chunk fails for now the first time
				return activities.ChunkResult{Sent: n - 10, Pending: 10}, nil
			}
			if in.From == 501 {
				return activities.ChunkResult{Sent: 10}, nil
			}
			return activities.ChunkResult{Sent: min(n, 1201-in.From)}, nil
		})
	var finished activities.RunRef
	env.OnActivity(notifyActivities.FinishNotificationRun, mock.Anything, mock.Anything).Return(
		func(_ context.Context, ref activities.RunRef) (activities.RunSummary, error) {
			finished = ref
			return activities.RunSummary{Status: "COMPLETED", Total: 1200, Sent: 1200}, nil
		})
	var summarized []string
	env.OnActivity(notifyActivities.SendNotificationSummary, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, ref activities.RunRef) (activities.ChunkResult, error) {
			if finished.RunID == 0 {
				t.Error("the summary was sent before the run was finished")
			}
			summarized = append(summarized, fmt.Sprint(ref.RunID, "@", activity.GetInfo(ctx).TaskQueue))
			return activities.ChunkResult{Sent: 1}, nil
		})

	env.ExecuteWorkflow(NotifyWorkflowName, NotifyInput{OrgID: 7, ScheduleID: 5})

	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", env.GetWorkflowError())
	}
	if !prepared.ScheduledAt.Equal(scheduled) || prepared.ScheduleID != 5 || prepared.OrgID != 7 {
		t.Errorf("prepared %+v; want the schedule's scheduled time %v", prepared, scheduled)
	}
	if want := []int64{1, 501, 1001, 501}; len(calls.froms) != 4 || calls.froms[3] != 501 {
		t.Errorf("chunks sent %v, want %v (in any order for the first three)", calls.froms, want)
	}
	if calls.queues[NotifyTaskQueue] != 4 {
		t.Errorf("send steps ran on %v, want all on %s", calls.queues, NotifyTaskQueue)
	}
	if wait := calls.at[3]; wait < notifyRoundWait(1) {
		t.Errorf("the retry round came %v after the start, want at least %v", wait, notifyRoundWait(1))
	}
	if finished.RunID != 99 {
		t.Errorf("finished %+v", finished)
	}
	if want := "[99@" + NotifyTaskQueue + "]"; fmt.Sprint(summarized) != want {
		t.Errorf("summary steps %v, want %s (once, after the finish, on the notify queue)", summarized, want)
	}
	var sum activities.RunSummary
	if err := env.GetWorkflowResult(&sum); err != nil || sum.Sent != 1200 {
		t.Errorf("result %+v, %v", sum, err)
	}
}

func TestNotificationRun_GivesUpAfterTheLastRound(t *testing.T) {
	env := newNotifyEnv(t)
	env.OnActivity(notifyActivities.PrepareNotificationRun, mock.Anything, mock.Anything).
		Return(activities.RunInfo{RunID: 1, Total: 10, Status: activities.RunStatusRunning}, nil)
	sends := 0
	env.OnActivity(notifyActivities.SendNotificationChunk, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.ChunkInput) (activities.ChunkResult, error) {
			sends++
			return activities.ChunkResult{Pending: 10}, nil
		})
	env.OnActivity(notifyActivities.FinishNotificationRun, mock.Anything, mock.Anything).
		Return(activities.RunSummary{Status: "COMPLETED", Total: 10, Failed: 10}, nil)
	env.OnActivity(notifyActivities.SendNotificationSummary, mock.Anything, mock.Anything).Return(activities.ChunkResult{}, nil)
	begin := env.Now()
	env.ExecuteWorkflow(NotifyWorkflowName, NotifyInput{OrgID: 1, ScheduleID: 2})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", env.GetWorkflowError())
	}
	if sends != NotifyRounds+1 {
		t.Errorf("%d send steps, want %d (the first round and %d retries)", sends, NotifyRounds+1, NotifyRounds)
	}
	var total time.Duration
	for r := 1; r <= NotifyRounds; r++ {
		total += notifyRoundWait(r)
	}
	if elapsed := env.Now().Sub(begin); elapsed < total {
		t.Errorf("workflow time %v, want at least %v of waits (skipped, not slept)", elapsed, total)
	}
}

func TestNotificationRun_NothingToSend(t *testing.T) {
	for _, info := range []activities.RunInfo{{Gone: true}, {RunID: 3, Status: "SKIPPED"}} {
		env := newNotifyEnv(t)
		env.OnActivity(notifyActivities.PrepareNotificationRun, mock.Anything, mock.Anything).Return(info, nil)
		env.ExecuteWorkflow(NotifyWorkflowName, NotifyInput{OrgID: 1, ScheduleID: 2})
		if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
			t.Fatalf("%+v: %v", info, env.GetWorkflowError())
		}
		// No send step or finish was mocked: calling one would fail the run.
	}
}

func TestNotificationRun_ContinuesAsNewOnLongRuns(t *testing.T) {
	env := newNotifyEnv(t)
	total := int64(notifyChunksPerRun+20) * NotifyChunkSize
	env.OnActivity(notifyActivities.PrepareNotificationRun, mock.Anything, mock.Anything).
		Return(activities.RunInfo{RunID: 1, Total: total, Status: activities.RunStatusRunning}, nil)
	env.OnActivity(notifyActivities.SendNotificationChunk, mock.Anything, mock.Anything).
		Return(activities.ChunkResult{Sent: NotifyChunkSize}, nil)
	env.ExecuteWorkflow(NotifyWorkflowName, NotifyInput{OrgID: 1, ScheduleID: 2})
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	var next NotifyInput
	if err := converterFor(t).FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Resume == nil || len(next.Resume.Chunks) != 20 || next.Resume.Result.Sent != notifyChunksPerRun*NotifyChunkSize {
		t.Errorf("handed over %+v", next.Resume)
	}
}
