package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/jobs"
)

// JobInput starts a job workflow. Resume is nil on a job's first run and
// carries the state across continue-as-new.
type JobInput struct {
	Job    jobs.JobRef `json:"job"`
	Resume *JobResume  `json:"resume,omitempty"`
}

// JobResume is the state a job workflow hands to its next run.
type JobResume struct {
	Info     activities.JobInfo  `json:"info"`
	Next     int64               `json:"next"` // first entity not processed yet
	Progress activities.Progress `json:"progress"`
}

// chunksPerRun bounds a run's history: after this many chunks a job workflow
// continues as new (sooner when the server suggests it).
const chunksPerRun = 200

// jobRun is the state every job workflow run shares: its job, its progress,
// and the query, summary and search attributes that show them.
type jobRun struct {
	ref      jobs.JobRef
	info     activities.JobInfo
	next     int64
	progress activities.Progress
	chunks   int
	// lastStep is when the run last recorded progress (or began): a
	// chunk's duration on the job metrics.
	lastStep time.Time
}

var jobActivities *activities.Jobs

// startJob begins a run: on the first run it marks the job RUNNING, on a
// continued one it takes over the handed state.
func startJob(ctx workflow.Context, in JobInput) (*jobRun, error) {
	r := &jobRun{ref: in.Job, lastStep: workflow.Now(ctx)}
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (activities.Progress, error) {
		return r.progress, nil
	}); err != nil {
		return nil, err
	}
	if in.Resume != nil {
		r.info, r.next, r.progress = in.Resume.Info, in.Resume.Next, in.Resume.Progress
	} else {
		actx := workflow.WithActivityOptions(ctx, bookkeepingOptions)
		if err := workflow.ExecuteActivity(actx, jobActivities.StartJob, in.Job).Get(actx, &r.info); err != nil {
			return nil, err
		}
		r.progress = r.info.Progress
	}
	r.show(ctx, "RUNNING")
	return r, nil
}

// advance records the progress a chunk reported, and the chunk on the job
// metrics (which record nothing while the workflow replays).
func (r *jobRun) advance(ctx workflow.Context, next int64, p activities.Progress) {
	m := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{activities.TagModule: r.info.Module})
	if done := p.Processed - r.progress.Processed; done > 0 {
		m.Counter(activities.MetricRowsProcessed).Inc(done)
	}
	now := workflow.Now(ctx)
	m.Timer(activities.MetricChunkDuration).Record(now.Sub(r.lastStep))
	r.lastStep = now
	r.next, r.progress = next, p
	r.chunks++
	r.show(ctx, "RUNNING")
}

// shouldContinueAsNew reports whether this run's history is long enough to
// hand over to a new run.
func (r *jobRun) shouldContinueAsNew(ctx workflow.Context) bool {
	return r.chunks >= chunksPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// continueAsNew returns the error that hands the run's state to a new run of fn.
func (r *jobRun) continueAsNew(ctx workflow.Context, fn any) error {
	return workflow.NewContinueAsNewError(ctx, fn, JobInput{
		Job:    r.ref,
		Resume: &JobResume{Info: r.info, Next: r.next, Progress: r.progress},
	})
}

// finish ends the job row after the body returned bodyErr, and returns the
// workflow's result. A deleted job (its DELETE also cancels the workflow)
// ends the workflow quietly.
func (r *jobRun) finish(ctx workflow.Context, bodyErr error) error {
	if workflow.IsContinueAsNewError(bodyErr) {
		return bodyErr
	}
	var appErr *temporal.ApplicationError
	if errors.As(bodyErr, &appErr) && appErr.Type() == activities.ErrJobGone {
		return nil
	}
	var canceled *temporal.CanceledError
	if errors.As(bodyErr, &canceled) {
		// The context is cancelled: write the end on a disconnected one.
		ctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	in := activities.FinishInput{Job: r.ref, Progress: r.progress}
	if bodyErr != nil {
		in.Failure = failureMessage(bodyErr)
	}
	ctx = workflow.WithActivityOptions(ctx, bookkeepingOptions)
	var status string
	err := workflow.ExecuteActivity(ctx, jobActivities.FinishJob, in).Get(ctx, &status)
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrJobGone {
		return nil
	}
	if err != nil {
		return err
	}
	r.show(ctx, status)
	return bodyErr
}

// show publishes the run's state to the Temporal UI: search attributes and
// the current-details text. Ids and counts only, never personal data.
func (r *jobRun) show(ctx workflow.Context, status string) {
	_ = workflow.UpsertTypedSearchAttributes(ctx,
		AttrStatus.ValueSet(status),
		AttrProcessed.ValueSet(r.progress.Processed),
		AttrTotal.ValueSet(r.progress.Total),
	)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf(
		"**%s**: %d of %d processed, %d succeeded, %d failed",
		status, r.progress.Processed, r.progress.Total, r.progress.Success, r.progress.Failed))
}

// failureMessage is the text a failed job shows: the cause, not the chain of
// wrappers Temporal adds.
func failureMessage(err error) string {
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return "the job was cancelled"
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return "the job failed: " + err.Error()
}

// bookkeepingOptions run the short activities that read and write job rows.
var bookkeepingOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    30 * time.Second,
	},
}

// chunkOptions run the activities that process a chunk of entities. A chunk
// heartbeats, so a worker that dies is noticed within the heartbeat timeout
// and the chunk is retried elsewhere; chunk writes are idempotent.
var chunkOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 10 * time.Minute,
	HeartbeatTimeout:    10 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    30 * time.Second,
	},
}
