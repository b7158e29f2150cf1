package management

import (
	"context"

	"iam/models"
	"iam/models/audit"
	"iam/models/jobs"
)

// The audit events of management: the view columns, uploads (created,
// rows deleted) and executions (started, retried) record their events
// (models.Record) inside the transactions that make the changes. What an
// execution does to each user is its job's work: the users moved or
// deleted are the job's results, and the job's lifecycle events
// (models/jobs) point to them; the chunked apply records no events.

// Target types of management's events (the jobs are jobs.JobTargetType).
const (
	// ViewTargetType is an action's view (its columns), by its path form
	// (move-users, delete-users).
	ViewTargetType      = "management_view"
	UploadTargetType    = "management_upload"
	UploadRowTargetType = "management_upload_row"
	ExecutionTargetType = "management_execution"
)

// maxEventTargets is the most targets one event holds; a bulk change
// with more writes several events of its type.
const maxEventTargets = 1000

// recordBulk records events of type typ: main first, then targets, at
// most maxEventTargets targets an event (main first in each).
func recordBulk(ctx context.Context, orgID int64, typ string, main models.EventTarget, targets []models.EventTarget) error {
	per := maxEventTargets - 1
	for start := 0; start == 0 || start < len(targets); start += per {
		part := targets[start:min(start+per, len(targets))]
		ev := models.AuditEvent{OrgID: orgID, Type: typ, Targets: make([]models.EventTarget, 0, len(part)+1)}
		ev.Targets = append(append(ev.Targets, main), part...)
		if err := models.Record(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

func viewTarget(a MgmtAction) models.EventTarget {
	return models.EventTarget{Type: ViewTargetType, ID: string(a), DisplayName: actionName(a)}
}

func uploadTarget(up *MgmtUpload) models.EventTarget {
	return audit.Target(UploadTargetType, up.ID, up.FileName)
}

func executionTarget(e *Execution) models.EventTarget {
	return audit.Target(ExecutionTargetType, e.ID, actionName(e.Action))
}

func jobTarget(j *jobs.Job) models.EventTarget {
	return audit.Target(jobs.JobTargetType, j.ID, j.ActionName)
}
