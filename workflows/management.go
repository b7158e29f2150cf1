package workflows

import (
	"encoding/json"
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/jobs"
	"iam/models/management"
)

// ManagementWorkflowName is the workflow type of management executions
// (models.MgmtJobKind: the job rows name it).
const ManagementWorkflowName = jobs.MgmtJobKind

// Execution sizing: targets per batch (one transaction each) and batches
// per activity (one heartbeat per batch).
const (
	MgmtBatchSize       = 2500
	MgmtBatchesPerChunk = 4
)

var mgmtActivities *activities.Management

// ManagementExecution runs one attempt of a management execution (move or
// delete users): its targets in seq order, in chunks. It ends the attempt
// completed (or completed_with_errors), time_out once the deadline has
// passed between chunks, or interrupted when the job is deleted or the
// workflow cancelled; then the job row as every job.
func ManagementExecution(ctx workflow.Context, in JobInput) error {
	run, err := startJob(ctx, in)
	if err != nil {
		return err
	}
	return run.finish(ctx, runManagement(ctx, run))
}

func runManagement(ctx workflow.Context, run *jobRun) error {
	var att activities.MgmtAttempt
	bctx := workflow.WithActivityOptions(ctx, bookkeepingOptions)
	if err := workflow.ExecuteActivity(bctx, mgmtActivities.StartExecutionAttempt, run.ref).Get(bctx, &att); err != nil {
		return err
	}
	if run.progress.Total == 0 {
		run.progress = att.Progress
	}
	status := management.ExecCompleted
	var bodyErr error
	cctx := workflow.WithActivityOptions(ctx, chunkOptions)
	for {
		if run.shouldContinueAsNew(ctx) {
			return run.continueAsNew(ctx, ManagementExecution)
		}
		if !att.Deadline.IsZero() && !workflow.Now(ctx).Before(att.Deadline) {
			status = management.ExecTimeOut
			break
		}
		chunk := activities.MgmtChunk{Job: run.ref, ExecutionID: att.ExecutionID, Attempt: att.Attempt,
			After: run.next, BatchSize: MgmtBatchSize, Batches: MgmtBatchesPerChunk, Before: run.progress}
		var res activities.MgmtChunkResult
		if err := workflow.ExecuteActivity(cctx, mgmtActivities.ExecuteChunk, chunk).Get(cctx, &res); err != nil {
			status, bodyErr = management.ExecInterrupted, err
			break
		}
		run.advance(ctx, res.After, res.Progress)
		if res.Done {
			break
		}
	}
	fctx := ctx
	var canceled *temporal.CanceledError
	if errors.As(bodyErr, &canceled) {
		fctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	fctx = workflow.WithActivityOptions(fctx, bookkeepingOptions)
	var final activities.Progress
	err := workflow.ExecuteActivity(fctx, mgmtActivities.FinishExecutionAttempt, activities.MgmtFinish{
		Job: run.ref, ExecutionID: att.ExecutionID, Attempt: att.Attempt, Status: string(status)}).Get(fctx, &final)
	if err == nil && final.Total > 0 {
		run.progress = final
	}
	if bodyErr != nil {
		return bodyErr
	}
	// A time_out ends the job by its counts (the users never reached count
	// as failed): WARNING or ERROR.
	return err
}

// ManagementResolveWorkflowName is the workflow type that resolves a large
// upload's rows (models.MgmtResolveJobKind).
const ManagementResolveWorkflowName = jobs.MgmtResolveJobKind

// MgmtResolveRows is how many rows of an upload one activity resolves (one
// transaction).
const MgmtResolveRows = 2000

// ManagementUploadResolve resolves a large upload's rows in chunks of
// consecutive rows, each chunk reading its rows from the byte offset the
// previous one recorded; the last chunk marks the upload resolved. Only
// row numbers and counts pass through the history; the file stays in the
// blob store.
func ManagementUploadResolve(ctx workflow.Context, in JobInput) error {
	run, err := startJob(ctx, in)
	if err != nil {
		return err
	}
	return run.finish(ctx, runUploadResolve(ctx, run))
}

func runUploadResolve(ctx workflow.Context, run *jobRun) error {
	var params management.UploadResolveInput
	if err := json.Unmarshal(run.info.Input, &params); err != nil {
		return temporal.NewNonRetryableApplicationError("the job input is not valid", activities.ErrInvalid, err)
	}
	if run.next == 0 {
		run.next = 1
	}
	cctx := workflow.WithActivityOptions(ctx, chunkOptions)
	for {
		if run.shouldContinueAsNew(ctx) {
			return run.continueAsNew(ctx, ManagementUploadResolve)
		}
		chunk := activities.MgmtResolveChunk{Job: run.ref, Params: params, From: run.next, Rows: MgmtResolveRows, Before: run.progress}
		var res activities.MgmtResolveResult
		if err := workflow.ExecuteActivity(cctx, mgmtActivities.ResolveUploadRows, chunk).Get(cctx, &res); err != nil {
			return err
		}
		run.advance(ctx, res.Next, res.Progress)
		if res.Done {
			return nil
		}
	}
}
