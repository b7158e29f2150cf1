// Package jobrun starts and stops the workflows behind job rows.
//
// Jobs are rows first: the API writes a job as QUEUED in the same transaction
// as its input, then calls Launch after the commit. When that start is lost
// (Temporal down, the process killed between commit and start) the
// Reconciler starts the job later. Starting is idempotent: the workflow id is
// "job-<id>" and a duplicate start is refused by Temporal and treated as done.
package jobrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"iam/models"
	"iam/models/jobs"
	"iam/models/store"
	"iam/workflows"
)

// Launcher starts and cancels job workflows.
type Launcher struct {
	Client client.Client
	Store  *store.Store
	Log    *slog.Logger
	// TaskQueue is where job workflows run; workflows.TaskQueue when empty.
	// Tests give each environment its own.
	TaskQueue string
}

// Launch starts the workflow of a committed QUEUED job. A job already started
// is not an error. On failure the job stays QUEUED for the Reconciler.
func (l *Launcher) Launch(ctx context.Context, job *jobs.Job) error {
	opts := client.StartWorkflowOptions{
		ID:                       job.WorkflowID(),
		TaskQueue:                cmp.Or(l.TaskQueue, workflows.TaskQueue),
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		StaticSummary:            fmt.Sprintf("%s job %d (%s)", job.ActionName, job.ID, job.Module),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrJobID.ValueSet(models.FormatID(job.ID)),
			workflows.AttrOrgID.ValueSet(models.FormatID(job.OrgID)),
			workflows.AttrModule.ValueSet(job.Module),
			workflows.AttrAction.ValueSet(job.ActionName),
			workflows.AttrStatus.ValueSet(string(jobs.JobQueued)),
		),
	}
	in := workflows.JobInput{Job: jobs.JobRef{JobID: job.ID, OrgID: job.OrgID}}
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := l.Client.ExecuteWorkflow(startCtx, opts, job.Kind, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("start workflow of job %d: %w", job.ID, err)
	}
	return nil
}

// Cancel asks the workflow of a job to stop. A workflow that does not exist
// or has ended is not an error.
func (l *Launcher) Cancel(ctx context.Context, jobID int64) error {
	if l.Client == nil {
		return fmt.Errorf("cancel workflow of job %d: no workflow engine is configured", jobID)
	}
	err := l.Client.CancelWorkflow(ctx, jobs.JobWorkflowID(jobID), "")
	var notFound *serviceerror.NotFound
	if err == nil || errors.As(err, &notFound) {
		return nil
	}
	return fmt.Errorf("cancel workflow of job %d: %w", jobID, err)
}

// Reconciler starts QUEUED jobs whose start was lost, and sweeps the
// uploaded files no job needs any more and the expired idempotency keys.
// Several may run at once (one per API process): starts are idempotent, and
// so are deletes.
type Reconciler struct {
	Launcher *Launcher
	// Interval between passes; Grace is how long a job may stay QUEUED before
	// the reconciler considers its start lost.
	Interval, Grace time.Duration
	// UploadGrace is how old an upload that never completed must be before
	// the sweep removes it; DefaultUploadGrace when zero.
	UploadGrace time.Duration
}

// DefaultUploadGrace is the Reconciler's UploadGrace when it sets none.
const DefaultUploadGrace = time.Hour

// Run reconciles and sweeps every Interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		if _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.Launcher.Log.Warn("job reconciler pass failed", "error", err)
		}
		if _, err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
			r.Launcher.Log.Warn("upload sweep failed", "error", err)
		}
		if _, err := r.Launcher.Store.Idempotency.Sweep(ctx, time.Now()); err != nil && ctx.Err() == nil {
			r.Launcher.Log.Warn("idempotency key sweep failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pass tries to start every stale QUEUED job once and returns how many it
// started (or found started already, their workflow not having run yet).
func (r *Reconciler) Pass(ctx context.Context) (int, error) {
	const page = 100
	started, after := 0, int64(0)
	for {
		jobs, err := r.Launcher.Store.Jobs.Stale(ctx, time.Now().Add(-r.Grace), after, page)
		if err != nil {
			return started, err
		}
		for i := range jobs {
			if err := r.Launcher.Launch(ctx, &jobs[i]); err != nil {
				return started, err // Temporal is likely down: try on the next pass
			}
			started++
			after = jobs[i].ID
		}
		if len(jobs) < page {
			return started, nil
		}
	}
}

// Sweep removes the uploaded files no job needs: those of jobs that ended or
// were deleted, and uploads that never completed, older than UploadGrace. It
// returns how many it removed.
func (r *Reconciler) Sweep(ctx context.Context) (int, error) {
	grace := cmp.Or(r.UploadGrace, DefaultUploadGrace)
	total := 0
	for {
		n, err := r.Launcher.Store.Blobs.Sweep(ctx, time.Now().Add(-grace))
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}
