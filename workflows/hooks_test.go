package workflows

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/mock"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/hooks"
)

func newHookEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(EventHookDelivery, workflow.RegisterOptions{Name: EventHookWorkflowName})
	env.RegisterWorkflowWithOptions(EventHooksSupervise, workflow.RegisterOptions{Name: EventHooksSuperviseWorkflowName})
	env.RegisterActivity(&activities.EventHooks{})
	return env
}

// The workflow runs its dispatcher until the hook is gone, keeping the
// backlog search attribute up to date.
func TestEventHookDelivery_EndsWhenTheHookStops(t *testing.T) {
	env := newHookEnv(t)
	calls := 0
	env.OnActivity(hookActivities.DeliverEventHook, mock.Anything, int64(7)).Return(
		func(_ context.Context, _ int64) (activities.EventHookRun, error) {
			calls++
			return activities.EventHookRun{Stop: calls == 3, Backlog: int64(10 - calls)}, nil
		})
	env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil)
	env.ExecuteWorkflow(EventHookWorkflowName, EventHookInput{HookID: 7, OrgID: 1})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Fatalf("%d runs, want 3", calls)
	}
}

func TestEventHookDelivery_ContinuesAsNew(t *testing.T) {
	env := newHookEnv(t)
	calls := 0
	env.OnActivity(hookActivities.DeliverEventHook, mock.Anything, int64(7)).Return(
		func(_ context.Context, _ int64) (activities.EventHookRun, error) {
			calls++
			return activities.EventHookRun{}, nil
		})
	env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil)
	env.ExecuteWorkflow(EventHookWorkflowName, EventHookInput{HookID: 7, OrgID: 1})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	if calls != eventHookRunsPerExecution {
		t.Fatalf("%d runs before continuing, want %d", calls, eventHookRunsPerExecution)
	}
	var next EventHookInput
	if err := converterFor(t).FromPayloads(can.Input, &next); err != nil || next != (EventHookInput{HookID: 7, OrgID: 1}) {
		t.Fatalf("handed over %+v (%v)", next, err)
	}
}

// The supervisor starts a workflow per enabled hook, and one already
// running is no error.
func TestEventHooksSupervise_StartsEachHooksWorkflow(t *testing.T) {
	env := newHookEnv(t)
	env.OnActivity(hookActivities.EnabledEventHooks, mock.Anything).Return([]hooks.HookRef{{ID: 1, OrgID: 9}, {ID: 2, OrgID: 9}}, nil)
	started := map[int64]bool{}
	env.OnWorkflow(EventHookWorkflowName, mock.Anything, mock.Anything).Return(
		func(_ workflow.Context, in EventHookInput) error { started[in.HookID] = true; return nil })
	env.ExecuteWorkflow(EventHooksSuperviseWorkflowName)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !started[1] || !started[2] {
		t.Fatalf("started %v", started)
	}
}
