package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
)

// The audit log's workflows run on schedules (AuditSealScheduleID,
// AuditRetentionScheduleID; the worker creates them): one seals every
// organization's new events into a signed digest, the other deletes
// events past their retention. Each organization is one activity, so a
// failing one is retried alone and shows in the Temporal UI.
const (
	AuditSealWorkflowName      = "AuditSeal"
	AuditRetentionWorkflowName = "AuditRetention"
	AuditSealScheduleID        = "iam-audit-seal"
	AuditRetentionScheduleID   = "iam-audit-retention"
)

var auditActivities *activities.Audit

var auditOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 10 * time.Minute,
	RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute, MaximumAttempts: 5},
}

// AuditSeal seals each audited organization's events committed since its
// last digest.
func AuditSeal(ctx workflow.Context) error {
	return eachAuditedOrg(ctx, auditActivities.SealAuditEvents)
}

// AuditRetention deletes each organization's sealed events past the
// retention.
func AuditRetention(ctx workflow.Context) error {
	return eachAuditedOrg(ctx, auditActivities.PruneAuditEvents)
}

// eachAuditedOrg runs step for every organization with audit events, in
// id order; it returns the first failure after trying them all.
func eachAuditedOrg(ctx workflow.Context, step any) error {
	ctx = workflow.WithActivityOptions(ctx, auditOptions)
	var orgs []int64
	if err := workflow.ExecuteActivity(ctx, auditActivities.AuditedOrgs).Get(ctx, &orgs); err != nil {
		return err
	}
	var first error
	for _, org := range orgs {
		var n int64
		if err := workflow.ExecuteActivity(ctx, step, org).Get(ctx, &n); err != nil && first == nil {
			first = err
		}
	}
	return first
}
