package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"iam/models"
	"iam/models/jobs"
	"iam/models/management"
	"iam/models/store"
)

// Management holds the activities of management executions (move and
// delete users in bulk).
type Management struct {
	Store *store.Store
	// Timeout is how long an attempt may run, from when it was made
	// (IAM_MGMT_EXECUTION_TIMEOUT); past it the attempt ends time_out.
	// Zero: no deadline.
	Timeout time.Duration
}

// MgmtAttempt is the attempt a job runs.
type MgmtAttempt struct {
	ExecutionID int64     `json:"execution_id,string"`
	Attempt     int       `json:"attempt"`
	Action      string    `json:"action"`
	Deadline    time.Time `json:"deadline"` // zero: none
	Progress    Progress  `json:"progress"`
}

// MgmtChunk asks for up to Batches batches of BatchSize targets of an
// attempt after seq After.
type MgmtChunk struct {
	Job         jobs.JobRef `json:"job"`
	ExecutionID int64       `json:"execution_id,string"`
	Attempt     int         `json:"attempt"`
	After       int64       `json:"after"`
	BatchSize   int         `json:"batch_size"`
	Batches     int         `json:"batches"`
	Before      Progress    `json:"before"`
}

// MgmtChunkResult is where a chunk ended.
type MgmtChunkResult struct {
	After    int64    `json:"after"`
	Done     bool     `json:"done"`
	Progress Progress `json:"progress"`
}

// MgmtFinish ends an attempt in Status.
type MgmtFinish struct {
	Job         jobs.JobRef `json:"job"`
	ExecutionID int64       `json:"execution_id,string"`
	Attempt     int         `json:"attempt"`
	Status      string      `json:"status"`
}

// StartExecutionAttempt marks the attempt the job runs pending and returns
// it with its deadline. Calling it again (a continued run) changes nothing.
func (a *Management) StartExecutionAttempt(ctx context.Context, ref jobs.JobRef) (MgmtAttempt, error) {
	att, err := a.Store.Management.StartJobAttempt(ctx, ref.OrgID, ref.JobID)
	if err != nil {
		return MgmtAttempt{}, temporalError(err)
	}
	out := MgmtAttempt{ExecutionID: att.ExecutionID, Attempt: att.Attempt, Action: string(att.Action),
		Progress: Progress{Total: att.Total, Success: att.Success, Failed: att.Failed, Processed: att.Success + att.Failed}}
	if a.Timeout > 0 {
		out.Deadline = att.CreatedAt.Add(a.Timeout).UTC()
	}
	return out, nil
}

// ExecuteChunk applies the attempt to its targets batch after batch, each
// batch one transaction with its results (models.MgmtStore.ApplyChunk), and
// copies each batch's results and the absolute progress to the job. It
// heartbeats after every batch, so a retried chunk resumes after the last
// committed one; a batch retried after its commit changes nothing.
func (a *Management) ExecuteChunk(ctx context.Context, in MgmtChunk) (MgmtChunkResult, error) {
	out := MgmtChunkResult{After: in.After, Progress: in.Before}
	if activity.HasHeartbeatDetails(ctx) {
		var resumed MgmtChunkResult
		if err := activity.GetHeartbeatDetails(ctx, &resumed); err == nil {
			out = resumed
		}
	}
	org := in.Job.OrgID
	for range in.Batches {
		res, err := a.Store.Management.ApplyChunk(ctx, org, in.ExecutionID, in.Attempt, out.After, in.BatchSize)
		if err != nil {
			return out, temporalError(err)
		}
		testHookChunkCommitted() // the fault tests' kill point; nothing otherwise
		out.After, out.Done = res.Last, res.Done
		out.Progress.Success, out.Progress.Failed = res.Success, res.Failed
		out.Progress.Processed = res.Success + res.Failed
		results := make([]jobs.JobResult, len(res.Results))
		for i, r := range res.Results {
			status := jobs.ResultSuccess
			if r.Status != management.ExecResultSuccess {
				status = jobs.ResultError
			}
			results[i] = jobs.JobResult{Seq: r.Seq, EntityID: models.FormatID(r.UserID), Status: status, Message: r.Message}
		}
		if err := a.Store.Jobs.RecordChunk(ctx, org, in.Job.JobID, results, out.Progress); err != nil {
			return out, temporalError(err)
		}
		activity.RecordHeartbeat(ctx, out)
		if out.Done {
			break
		}
	}
	return out, nil
}

// FinishExecutionAttempt ends the attempt (and the execution) in the given
// status and returns the attempt's final counts; users never reached count
// as failed. Finishing again changes nothing.
func (a *Management) FinishExecutionAttempt(ctx context.Context, in MgmtFinish) (Progress, error) {
	m := a.Store.Management
	if err := m.FinishAttempt(ctx, in.Job.OrgID, in.ExecutionID, in.Attempt, management.ExecutionStatus(in.Status)); err != nil {
		return Progress{}, temporalError(err)
	}
	atts, err := m.Attempts(ctx, in.ExecutionID)
	if err != nil {
		return Progress{}, err
	}
	for _, att := range atts {
		if att.Attempt == in.Attempt {
			return Progress{Total: att.Total, Success: att.SuccessCount, Failed: att.FailedCount,
				Processed: att.SuccessCount + att.FailedCount}, nil
		}
	}
	return Progress{}, nil
}
