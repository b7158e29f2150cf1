package activities

import (
	"context"
	"encoding/json"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"iam/models/devices"
	"iam/models/jobs"
	"iam/models/store"
)

// Devices holds the activities of device jobs (account-linking sync).
type Devices struct {
	Store *store.Store
}

// SyncChunk asks for up to Batches batches of BatchSize accounts of a
// sync job, with the settings the job was started with.
type SyncChunk struct {
	Job       jobs.JobRef                    `json:"job"`
	Settings  devices.AccountLinkingSettings `json:"settings"`
	BatchSize int                            `json:"batch_size"`
	Batches   int                            `json:"batches"`
}

// SyncChunkResult is where a chunk left the job.
type SyncChunkResult struct {
	Last     int64    `json:"last,string"` // the last account covered
	Done     bool     `json:"done"`
	Progress Progress `json:"progress"`
}

// SyncAccountsChunk runs batches of the sync (models.DeviceStore.SyncBatch),
// each one transaction with its links, results and the job's progress, and
// heartbeats after each. The job row is the cursor, so a chunk retried
// after some of its batches committed goes on after them.
func (a *Devices) SyncAccountsChunk(ctx context.Context, in SyncChunk) (SyncChunkResult, error) {
	var out SyncChunkResult
	for range max(in.Batches, 1) {
		res, err := a.Store.Devices.SyncBatch(ctx, in.Job.OrgID, in.Job.JobID, &in.Settings, in.BatchSize)
		if err != nil {
			return out, temporalError(err)
		}
		testHookChunkCommitted() // the fault tests' kill point; nothing otherwise
		out = SyncChunkResult{Last: res.Last, Done: res.Done, Progress: res.Progress}
		activity.RecordHeartbeat(ctx, out)
		if out.Done {
			break
		}
	}
	return out, nil
}

// ReadSyncInput decodes a sync job's input: the settings it applies.
func ReadSyncInput(raw json.RawMessage) (devices.AccountLinkingSettings, error) {
	var set devices.AccountLinkingSettings
	if err := json.Unmarshal(raw, &set); err != nil || set.AttributeType == "" {
		return set, temporal.NewNonRetryableApplicationError("the job input is not account-linking settings", ErrInvalid, err)
	}
	return set, nil
}
