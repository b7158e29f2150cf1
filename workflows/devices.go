package workflows

import (
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/jobs"
)

// DeviceSyncWorkflowName is the workflow type of account-linking syncs (the
// job rows name it).
const DeviceSyncWorkflowName = jobs.DeviceSyncJobKind

// Sync sizing: accounts per batch (one transaction each) and batches per
// activity (one heartbeat per batch).
const (
	SyncBatchSize       = 2000
	SyncBatchesPerChunk = 5
)

var deviceActivities *activities.Devices

// DeviceAccountSync applies the account-linking settings the job was
// started with to every unlinked local account of the organization's
// devices, in chunks of batches; each account is linked (Automatic,
// pending_link, a link command) or skipped, its result on the job.
func DeviceAccountSync(ctx workflow.Context, in JobInput) error {
	run, err := startJob(ctx, in)
	if err != nil {
		return err
	}
	return run.finish(ctx, runDeviceSync(ctx, run))
}

func runDeviceSync(ctx workflow.Context, run *jobRun) error {
	set, err := activities.ReadSyncInput(run.info.Input)
	if err != nil {
		return err
	}
	ctx = workflow.WithActivityOptions(ctx, chunkOptions)
	for {
		if run.shouldContinueAsNew(ctx) {
			return run.continueAsNew(ctx, DeviceAccountSync)
		}
		chunk := activities.SyncChunk{Job: run.ref, Settings: set, BatchSize: SyncBatchSize, Batches: SyncBatchesPerChunk}
		var res activities.SyncChunkResult
		if err := workflow.ExecuteActivity(ctx, deviceActivities.SyncAccountsChunk, chunk).Get(ctx, &res); err != nil {
			return err
		}
		run.advance(ctx, res.Last, res.Progress)
		if res.Done {
			return nil
		}
	}
}
