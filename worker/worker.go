// Package worker builds and runs the Temporal workers of the service: it
// registers every workflow and activity on the task queue, and makes sure
// the namespace has the search attributes the workflows set.
package worker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/audit"
	"iam/models/hooks"
	"iam/models/secret"
	"iam/models/store"
	"iam/workflows"
)

// Deps are what the activities need.
type Deps struct {
	Store *store.Store
	// Secrets seals enrollment secrets (IAM_ENCRYPTION_KEY); nil leaves the
	// rows that carry one failing.
	Secrets *secret.Box
	// MgmtExecutionTimeout is how long a management execution's attempt may
	// run (IAM_MGMT_EXECUTION_TIMEOUT); zero: no deadline.
	MgmtExecutionTimeout time.Duration
	// AuditSigner signs the audit digests (IAM_AUDIT_SIGNING_KEY); nil
	// seals nothing. AuditRetention is how long events are kept.
	AuditSigner    *audit.Signer
	AuditRetention time.Duration
	// EventHooks configure event hook deliveries (docs/event-hooks.md):
	// the ranges a hook may reach although private
	// (IAM_EVENT_HOOKS_ALLOW_PRIVATE), the requests a hook has in flight
	// (IAM_EVENT_HOOKS_CONCURRENCY), and the retry policy (tests shorten
	// it; zero: hooks.DefaultPolicy).
	EventHookAllowPrivate []netip.Prefix
	EventHookConcurrency  int
	EventHookPolicy       hooks.Policy
	EventHookPoll         time.Duration
}

// New returns a worker on workflows.TaskQueue with every workflow and
// activity registered. Start it with Run or Start.
func New(c client.Client, deps Deps) sdkworker.Worker {
	return NewOn(c, workflows.TaskQueue, deps)
}

// NewOn is New on another task queue (tests give each environment its own).
func NewOn(c client.Client, taskQueue string, deps Deps) sdkworker.Worker {
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
	Register(w, deps)
	return w
}

// Register adds every workflow and activity to r (a worker, or a test
// environment).
func Register(r sdkworker.Registry, deps Deps) {
	RegisterWorkflows(r)
	RegisterActivities(r, deps)
}

// RegisterWorkflows adds every workflow, under its stable name, to r (a
// worker or a replayer).
func RegisterWorkflows(r sdkworker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.Diagnostic, workflow.RegisterOptions{Name: workflows.DiagnosticWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.GroupRecompute, workflow.RegisterOptions{Name: workflows.GroupRecomputeWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.EnrollCSV, workflow.RegisterOptions{Name: workflows.EnrollCSVWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.EnrollSmartCards, workflow.RegisterOptions{Name: workflows.EnrollSmartCardsWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.NotificationRun, workflow.RegisterOptions{Name: workflows.NotifyWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.ManagementExecution, workflow.RegisterOptions{Name: workflows.ManagementWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.DeviceAccountSync, workflow.RegisterOptions{Name: workflows.DeviceSyncWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.ManagementUploadResolve, workflow.RegisterOptions{Name: workflows.ManagementResolveWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.AuditSeal, workflow.RegisterOptions{Name: workflows.AuditSealWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.AuditRetention, workflow.RegisterOptions{Name: workflows.AuditRetentionWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.EventHookDelivery, workflow.RegisterOptions{Name: workflows.EventHookWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.EventHooksSupervise, workflow.RegisterOptions{Name: workflows.EventHooksSuperviseWorkflowName})
}

// RegisterActivities adds every activity to r.
func RegisterActivities(r sdkworker.ActivityRegistry, deps Deps) {
	r.RegisterActivity(&activities.Jobs{Store: deps.Store})
	r.RegisterActivity(&activities.Diagnostics{Store: deps.Store})
	r.RegisterActivity(&activities.Groups{Store: deps.Store})
	r.RegisterActivity(&activities.Management{Store: deps.Store, Timeout: deps.MgmtExecutionTimeout})
	r.RegisterActivity(&activities.Devices{Store: deps.Store})
	r.RegisterActivity(&activities.Enrollment{Store: deps.Store, Secrets: deps.Secrets})
	// Prepare and finish of notification runs; their send step runs on the
	// notify worker (NewNotify).
	r.RegisterActivity(&activities.Notifications{Store: deps.Store})
	r.RegisterActivity(&activities.Audit{Store: deps.Store, Signer: deps.AuditSigner, Retention: deps.AuditRetention})
	conc := deps.EventHookConcurrency
	if conc <= 0 {
		conc = activities.DefaultHookConcurrency
	}
	r.RegisterActivity(&activities.EventHooks{Store: deps.Store, Client: activities.NewHookClient(deps.EventHookAllowPrivate, conc),
		Concurrency: conc, Policy: deps.EventHookPolicy, Poll: deps.EventHookPoll})
}

// EnsureEventHookSchedule creates the schedule of EventHooksSupervise
// (every minute: it starts the delivery workflow of any enabled hook
// that has none running), leaving it alone when it exists.
func EnsureEventHookSchedule(ctx context.Context, c client.Client) error {
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      workflows.EventHooksScheduleID,
		Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: time.Minute}}},
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{ID: workflows.EventHooksScheduleID, Workflow: workflows.EventHooksSuperviseWorkflowName,
			TaskQueue: workflows.TaskQueue, WorkflowExecutionTimeout: 10 * time.Minute},
		TriggerImmediately: true,
	})
	if err != nil && !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("create schedule %s: %w", workflows.EventHooksScheduleID, err)
	}
	return nil
}

// EnsureAuditSchedules creates the schedules of the audit log's workflows,
// or sets their interval when they exist: sealing every sealEvery,
// pruning once a day. Overlapping runs are skipped.
func EnsureAuditSchedules(ctx context.Context, c client.Client, sealEvery time.Duration) error {
	for _, s := range []struct {
		id, workflow string
		every        time.Duration
	}{
		{workflows.AuditSealScheduleID, workflows.AuditSealWorkflowName, sealEvery},
		{workflows.AuditRetentionScheduleID, workflows.AuditRetentionWorkflowName, 24 * time.Hour},
	} {
		spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: s.every}}}
		_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
			ID:      s.id,
			Spec:    spec,
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
			Action: &client.ScheduleWorkflowAction{ID: s.id, Workflow: s.workflow, TaskQueue: workflows.TaskQueue,
				WorkflowExecutionTimeout: 6 * time.Hour},
		})
		if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
			if err != nil {
				return fmt.Errorf("create schedule %s: %w", s.id, err)
			}
			continue
		}
		err = c.ScheduleClient().GetHandle(ctx, s.id).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				in.Description.Schedule.Spec = &spec
				return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
			},
		})
		if err != nil {
			return fmt.Errorf("update schedule %s: %w", s.id, err)
		}
	}
	return nil
}

// EnsureSearchAttributes registers the workflows' custom search attributes
// in namespace, leaving those that exist alone.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	want := workflows.SearchAttributes()
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	for name := range have.GetCustomAttributes() {
		delete(want, name)
	}
	if len(want) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: want,
	})
	var exists *serviceerror.AlreadyExists
	if errors.As(err, &exists) || (err != nil && strings.Contains(err.Error(), "already exists")) {
		return nil // another process registered them first
	}
	if err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}
