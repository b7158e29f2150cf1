package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
)

// Notification runs: the workflow each notification schedule's Temporal
// Schedule starts, and its task queues.
const (
	// NotifyWorkflowName is the workflow type of a notification run.
	NotifyWorkflowName = "NotificationRun"
	// NotifyTaskQueue is the task queue of the send step: a queue of its
	// own, so that its worker can be rate-limited (TaskQueueActivitiesPerSecond)
	// apart from everything else.
	NotifyTaskQueue = "iam-notify"
)

// NotifyTaskQueueFor returns the send-step queue paired with the task queue
// a notification run's workflow runs on: NotifyTaskQueue for TaskQueue,
// "<queue>-notify" for any other (tests give each environment its own).
func NotifyTaskQueueFor(queue string) string {
	if queue == TaskQueue || queue == "" {
		return NotifyTaskQueue
	}
	return queue + "-notify"
}

// NotifyInput starts a notification run. Resume carries a run across
// continue-as-new.
type NotifyInput struct {
	OrgID      int64         `json:"org_id,string"`
	ScheduleID int64         `json:"schedule_id,string"`
	Resume     *NotifyResume `json:"resume,omitempty"`
}

// NotifyResume is the state a notification run hands to its next run.
type NotifyResume struct {
	Run    activities.RunInfo     `json:"run"`
	Round  int                    `json:"round"`
	Chunks []int64                `json:"chunks"` // first seq of each chunk still to send this round
	Retry  []int64                `json:"retry"`  // chunks to send again next round
	Result activities.ChunkResult `json:"result"`
}

// Tunables of notification runs.
const (
	// NotifyChunkSize is the deliveries of one send step.
	NotifyChunkSize = 500
	// NotifyParallelChunks is how many send steps a run keeps in flight.
	NotifyParallelChunks = 4
	// NotifyRounds is how many times deliveries that failed temporarily are
	// tried again; notifyRoundWait(round) apart.
	NotifyRounds = 4
	// notifyChunksPerRun bounds a workflow run's history before it
	// continues as new.
	notifyChunksPerRun = 500
)

// notifyRoundWait is the pause before retry round n (1, 2, …): 1, 4, 16 min.
func notifyRoundWait(n int) time.Duration {
	return time.Minute << (2 * (n - 1))
}

// scheduledStartTime is the search attribute a Temporal Schedule sets on the
// workflows it starts.
var scheduledStartTime = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")

var notifyActivities *activities.Notifications

// NotificationRun sends one run of a notification schedule: it prepares the
// run (its recipients, once per scheduled time), sends its deliveries in
// chunks on the notify task queue, sends again in later rounds what failed
// temporarily, records the outcome, and sends the run's summary to the
// template's own addresses (mail.to/cc, sms.to).
func NotificationRun(ctx workflow.Context, in NotifyInput) (activities.RunSummary, error) {
	st, err := startNotify(ctx, in)
	if err != nil || st == nil {
		return activities.RunSummary{}, err
	}
	return st.run(ctx, in)
}

// notifyState is a run in progress.
type notifyState struct {
	NotifyResume
	sentChunks int
}

// startNotify prepares the run, or takes over a continued one. It returns
// nil when there is nothing to send.
func startNotify(ctx workflow.Context, in NotifyInput) (*notifyState, error) {
	if in.Resume != nil {
		return &notifyState{NotifyResume: *in.Resume}, nil
	}
	scheduled := workflow.GetInfo(ctx).WorkflowStartTime
	if t, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(scheduledStartTime); ok && !t.IsZero() {
		scheduled = t
	}
	actx := workflow.WithActivityOptions(ctx, bookkeepingOptions)
	var info activities.RunInfo
	err := workflow.ExecuteActivity(actx, notifyActivities.PrepareNotificationRun, activities.PrepareRunInput{
		OrgID: in.OrgID, ScheduleID: in.ScheduleID, ScheduledAt: scheduled.UTC().Truncate(time.Second),
	}).Get(ctx, &info)
	if err != nil {
		return nil, err
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s**: run %d, %d deliveries", info.Status, info.RunID, info.Total))
	if info.Gone || info.Status != activities.RunStatusRunning {
		return nil, nil
	}
	st := &notifyState{NotifyResume: NotifyResume{Run: info}}
	for from := int64(1); from <= info.Total; from += NotifyChunkSize {
		st.Chunks = append(st.Chunks, from)
	}
	return st, nil
}

// run sends the remaining chunks round by round, then finishes the run.
func (st *notifyState) run(ctx workflow.Context, in NotifyInput) (activities.RunSummary, error) {
	ref := activities.RunRef{OrgID: in.OrgID, RunID: st.Run.RunID}
	sendCtx := workflow.WithActivityOptions(ctx, notifySendOptions(NotifyTaskQueueFor(workflow.GetInfo(ctx).TaskQueueName)))
	for {
		if err := st.sendRound(sendCtx, ref); err != nil {
			return activities.RunSummary{}, err
		}
		if len(st.Chunks) > 0 { // history is long: hand over mid-round
			return activities.RunSummary{}, st.continueAsNew(ctx, in)
		}
		if len(st.Retry) == 0 || st.Round >= NotifyRounds {
			break
		}
		st.Round++
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**RETRYING**: run %d, round %d in %s", st.Run.RunID, st.Round, notifyRoundWait(st.Round)))
		if err := workflow.Sleep(ctx, notifyRoundWait(st.Round)); err != nil {
			return activities.RunSummary{}, err
		}
		st.Chunks, st.Retry = st.Retry, nil
	}
	var sum activities.RunSummary
	actx := workflow.WithActivityOptions(ctx, bookkeepingOptions)
	if err := workflow.ExecuteActivity(actx, notifyActivities.FinishNotificationRun, ref).Get(ctx, &sum); err != nil {
		return sum, err
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s**: run %d: %d sent, %d failed, %d uncertain of %d",
		sum.Status, st.Run.RunID, sum.Sent, sum.Failed, sum.Uncertain, sum.Total))
	// Runs recorded before summaries existed finished here.
	if workflow.GetVersion(ctx, summaryChange, workflow.DefaultVersion, 1) == 1 {
		var r activities.ChunkResult
		if err := workflow.ExecuteActivity(sendCtx, notifyActivities.SendNotificationSummary, ref).Get(ctx, &r); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// summaryChange is the version marker of the run summary step: a finished
// run sends its summary to the template's own addresses.
const summaryChange = "run-summary"

// sendRound sends st.Chunks with up to NotifyParallelChunks in flight,
// collecting in st.Retry the chunks with deliveries left pending. It stops
// early, leaving the rest in st.Chunks, when the history grows long.
func (st *notifyState) sendRound(ctx workflow.Context, ref activities.RunRef) error {
	type inflight struct {
		from int64
		f    workflow.Future
	}
	var window []inflight
	wait := func() error {
		head := window[0]
		window = window[1:]
		var r activities.ChunkResult
		if err := head.f.Get(ctx, &r); err != nil {
			return err
		}
		st.Result = st.Result.Add(activities.ChunkResult{Sent: r.Sent, Failed: r.Failed, Uncertain: r.Uncertain})
		if r.Pending > 0 {
			st.Retry = append(st.Retry, head.from)
		}
		return nil
	}
	for len(st.Chunks) > 0 || len(window) > 0 {
		if len(st.Chunks) > 0 && len(window) < NotifyParallelChunks && !st.longHistory(ctx) {
			from := st.Chunks[0]
			st.Chunks = st.Chunks[1:]
			in := activities.ChunkInput{Run: ref, From: from, To: from + NotifyChunkSize}
			window = append(window, inflight{from: from, f: workflow.ExecuteActivity(ctx, notifyActivities.SendNotificationChunk, in)})
			st.sentChunks++
			continue
		}
		if len(window) == 0 { // long history and nothing in flight
			return nil
		}
		if err := wait(); err != nil {
			return err
		}
	}
	return nil
}

func (st *notifyState) longHistory(ctx workflow.Context) bool {
	return st.sentChunks >= notifyChunksPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

func (st *notifyState) continueAsNew(ctx workflow.Context, in NotifyInput) error {
	in.Resume = &st.NotifyResume
	return workflow.NewContinueAsNewError(ctx, NotificationRun, in)
}

// notifySendOptions run the send step on queue. It heartbeats after every
// few messages, so a dead worker is noticed within seconds; it is retried
// without end (a run waits for a worker or the database to come back), and
// a retry never sends a delivery twice.
func notifySendOptions(queue string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           queue,
		StartToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:    20 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
		},
	}
}
