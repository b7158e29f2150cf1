package activities

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"golang.org/x/time/rate"

	"iam/models/notification"
	"iam/models/store"
	"iam/notify"
)

// Notifications holds the activities of notification runs. Prepare and
// Finish need only the store and run on the jobs task queue; the send step
// runs on the rate-limited notify task queue, whose worker has the senders.
type Notifications struct {
	Store *store.Store
	// Mail and SMS send the messages; a nil one fails its deliveries.
	Mail notify.Mailer
	SMS  notify.SMSGateway
	// Limiter, when set, paces the messages this process sends.
	Limiter *rate.Limiter
	// Concurrency is how many messages of a chunk are in flight at once; 4
	// when zero.
	Concurrency int
	// ClaimBatch is how many deliveries a sender claims at once; 4 when
	// zero. A crash leaves at most Concurrency × ClaimBatch deliveries of a
	// chunk uncertain.
	ClaimBatch int
	Log        *slog.Logger
}

// RunRef names a run.
type RunRef struct {
	OrgID int64 `json:"org_id,string"`
	RunID int64 `json:"run_id,string"`
}

// PrepareRunInput asks for the run of a schedule at a scheduled time.
type PrepareRunInput struct {
	OrgID       int64     `json:"org_id,string"`
	ScheduleID  int64     `json:"schedule_id,string"`
	ScheduledAt time.Time `json:"scheduled_at"`
}

// RunStatusRunning is the status of a run that has deliveries to send.
const RunStatusRunning = notification.RunRunning

// RunInfo is a prepared run. Gone says the schedule was deleted: nothing
// to do.
type RunInfo struct {
	RunID  int64  `json:"run_id,string"`
	Total  int64  `json:"total"`
	Status string `json:"status"`
	Gone   bool   `json:"gone,omitempty"`
}

// ChunkInput asks for the deliveries of a run with seq in [From, To).
// Summary asks for the summary deliveries of a finished run.
type ChunkInput struct {
	Run     RunRef `json:"run"`
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	Summary bool   `json:"summary,omitempty"`
}

// ChunkResult counts what a send step did. Pending deliveries failed for
// now (nothing delivered) and are worth another round.
type ChunkResult struct {
	Sent      int64 `json:"sent"`
	Failed    int64 `json:"failed"`
	Uncertain int64 `json:"uncertain"`
	Pending   int64 `json:"pending"`
}

// Add sums two results.
func (r ChunkResult) Add(o ChunkResult) ChunkResult {
	return ChunkResult{Sent: r.Sent + o.Sent, Failed: r.Failed + o.Failed, Uncertain: r.Uncertain + o.Uncertain, Pending: r.Pending + o.Pending}
}

// RunSummary is a finished run.
type RunSummary struct {
	Status    string `json:"status"`
	Total     int64  `json:"total"`
	Sent      int64  `json:"sent"`
	Failed    int64  `json:"failed"`
	Uncertain int64  `json:"uncertain"`
}

// PrepareNotificationRun fixes the run's recipients (once per schedule and
// scheduled time; a retry finds the same run).
func (a *Notifications) PrepareNotificationRun(ctx context.Context, in PrepareRunInput) (RunInfo, error) {
	run, err := a.Store.Notifications.PrepareRun(ctx, notification.PrepareRunInput{
		OrgID: in.OrgID, ScheduleID: in.ScheduleID, ScheduledAt: in.ScheduledAt,
	})
	if errors.Is(err, notification.ErrScheduleGone) {
		return RunInfo{Gone: true}, nil
	}
	if err != nil {
		return RunInfo{}, temporalError(err)
	}
	return RunInfo{RunID: run.ID, Total: run.Total, Status: run.Status}, nil
}

// FinishNotificationRun gives up on deliveries still pending and records
// the run's outcome.
func (a *Notifications) FinishNotificationRun(ctx context.Context, ref RunRef) (RunSummary, error) {
	run, err := a.Store.Notifications.FinishRun(ctx, ref.RunID, "still failing after every retry round")
	if err != nil {
		return RunSummary{}, temporalError(err)
	}
	return RunSummary{Status: run.Status, Total: run.Total, Sent: run.Sent, Failed: run.Failed, Uncertain: run.Uncertain}, nil
}
