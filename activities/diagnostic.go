package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"iam/models/jobs"
	"iam/models/store"
)

// DiagnosticParams is the input of a diagnostic job: synthetic items that
// exercise the job machinery end to end (chunks, progress, per-entity
// results, retries) without touching any business data.
type DiagnosticParams struct {
	Items       int64 `json:"items"`
	ChunkSize   int64 `json:"chunk_size"`
	DelayMillis int64 `json:"delay_ms"`   // pause per item, to make a job last
	FailEvery   int64 `json:"fail_every"` // every n-th item fails; 0 never
}

// DiagnosticChunk asks for items [From, To) of a diagnostic job.
type DiagnosticChunk struct {
	Job    jobs.JobRef      `json:"job"`
	Params DiagnosticParams `json:"params"`
	From   int64            `json:"from"`
	To     int64            `json:"to"`
	Before Progress         `json:"before"` // progress before this chunk
}

// Diagnostics holds the diagnostic job's activity.
type Diagnostics struct {
	Store *store.Store
}

// RunDiagnosticChunk processes one chunk and records its results and the
// job's new progress; it returns that progress.
func (a *Diagnostics) RunDiagnosticChunk(ctx context.Context, in DiagnosticChunk) (Progress, error) {
	results := make([]jobs.JobResult, 0, in.To-in.From)
	p := in.Before
	for i := in.From; i < in.To; i++ {
		if in.Params.DelayMillis > 0 {
			select {
			case <-ctx.Done():
				return Progress{}, ctx.Err()
			case <-time.After(time.Duration(in.Params.DelayMillis) * time.Millisecond):
			}
		}
		activity.RecordHeartbeat(ctx, i)
		r := jobs.JobResult{Seq: i + 1, EntityID: fmt.Sprint(i + 1), Status: jobs.ResultSuccess}
		if in.Params.FailEvery > 0 && (i+1)%in.Params.FailEvery == 0 {
			r.Status, r.Message = jobs.ResultError, "failed on purpose"
			p.Failed++
		} else {
			p.Success++
		}
		results = append(results, r)
	}
	p.Processed = in.To
	p.Total = in.Params.Items
	if err := a.Store.Jobs.RecordChunk(ctx, in.Job.OrgID, in.Job.JobID, results, p); err != nil {
		return Progress{}, temporalError(err)
	}
	return p, nil
}
