// Package worker builds and runs the Temporal workers of the service: it
// registers every workflow and activity on the task queue, and makes sure
// the namespace has the search attributes the workflows set.
package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
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
