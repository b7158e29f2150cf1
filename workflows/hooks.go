package workflows

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/hooks"
)

// Event hooks (docs/event-hooks.md): each enabled hook has one long-running
// workflow, EventHookDelivery with id event-hook-<id>, that runs its
// dispatcher activity again and again (each run turns new audit events into
// deliveries and sends the due ones for a minute) and continues as new
// every so often. It ends when the hook is deleted or disabled. The API
// starts it when a hook is created or enabled; EventHooksSupervise, on the
// schedule EventHooksScheduleID, starts any enabled hook's that is not
// running (a start lost, a worker that was down).
const (
	EventHookWorkflowName           = "EventHookDelivery"
	EventHooksSuperviseWorkflowName = "EventHooksSupervise"
	EventHooksScheduleID            = "iam-event-hooks"
	// eventHookRunsPerExecution is how many dispatcher runs (about a
	// minute each) one execution makes before continuing as new.
	eventHookRunsPerExecution = 120
)

// Search attributes of event hook workflows: the hook, and its backlog of
// pending deliveries (IamEventHookBacklog > 0 finds the hooks behind).
var (
	AttrEventHookID      = temporal.NewSearchAttributeKeyKeyword("IamEventHookId")
	AttrEventHookBacklog = temporal.NewSearchAttributeKeyInt64("IamEventHookBacklog")
)

// EventHookWorkflowID is the workflow id of a hook's deliveries.
func EventHookWorkflowID(hookID int64) string {
	return "event-hook-" + strconv.FormatInt(hookID, 10)
}

// EventHookInput names the hook.
type EventHookInput struct {
	HookID int64 `json:"hook_id,string"`
	OrgID  int64 `json:"org_id,string"`
}

var hookActivities *activities.EventHooks

var hookDeliverOptions = workflow.ActivityOptions{
	// A run lasts activities.DefaultHookRunFor and a batch's requests at
	// most activities.HookTimeout; a worker that dies is noticed by its
	// missing heartbeats.
	StartToCloseTimeout: 5 * time.Minute,
	HeartbeatTimeout:    15 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
}

// EventHookDelivery runs a hook's dispatcher until the hook is deleted or
// disabled.
func EventHookDelivery(ctx workflow.Context, in EventHookInput) error {
	id := strconv.FormatInt(in.HookID, 10)
	if err := workflow.UpsertTypedSearchAttributes(ctx, AttrEventHookID.ValueSet(id),
		AttrOrgID.ValueSet(strconv.FormatInt(in.OrgID, 10))); err != nil {
		return err
	}
	ctx = workflow.WithActivityOptions(ctx, hookDeliverOptions)
	backlog := int64(-1)
	for i := 0; i < eventHookRunsPerExecution; i++ {
		var run activities.EventHookRun
		if err := workflow.ExecuteActivity(ctx, hookActivities.DeliverEventHook, in.HookID).Get(ctx, &run); err != nil {
			return err
		}
		if run.Backlog != backlog {
			backlog = run.Backlog
			if err := workflow.UpsertTypedSearchAttributes(ctx, AttrEventHookBacklog.ValueSet(backlog)); err != nil {
				return err
			}
		}
		if run.Stop {
			return nil
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
	}
	return workflow.NewContinueAsNewError(ctx, EventHookDelivery, in)
}

// EventHooksSupervise starts the workflow of every enabled hook that has
// none running.
func EventHooksSupervise(ctx workflow.Context) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}})
	var refs []hooks.HookRef
	if err := workflow.ExecuteActivity(actx, hookActivities.EnabledEventHooks).Get(ctx, &refs); err != nil {
		return err
	}
	var first error
	for _, r := range refs {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:            EventHookWorkflowID(r.ID),
			TaskQueue:             workflow.GetInfo(ctx).TaskQueueName,
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:         fmt.Sprintf("event hook %d deliveries", r.ID),
		})
		f := workflow.ExecuteChildWorkflow(cctx, EventHookWorkflowName, EventHookInput{HookID: r.ID, OrgID: r.OrgID})
		err := f.GetChildWorkflowExecution().Get(ctx, nil)
		var started *temporal.ChildWorkflowExecutionAlreadyStartedError
		if err != nil && !errors.As(err, &started) && first == nil {
			first = err
		}
	}
	return first
}
