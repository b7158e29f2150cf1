package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"iam/models"
	"iam/models/notification"
	"iam/models/store"
	"iam/workflows"
)

// scheduleCatchup is how late a run may still start after the time it was
// due (the workflow engine or every worker down at that time).
const scheduleCatchup = 6 * time.Hour

// scheduleMirror keeps a notification schedule's Temporal Schedule in step
// with its row.
type scheduleMirror struct {
	c     client.Client
	queue string // the task queue of the run workflows
	store *store.Store
	log   *slog.Logger
	// timeZone is the organization's, read by write before its
	// transaction.
	timeZone string
}

// scheduleMirror returns the mirror, or nil without Temporal.
func (s *Server) scheduleMirror() *scheduleMirror {
	if s.deps.Temporal == nil {
		return nil
	}
	queue := workflows.TaskQueue
	if s.deps.Jobs != nil {
		queue = cmp.Or(s.deps.Jobs.TaskQueue, queue)
	}
	return &scheduleMirror{c: s.deps.Temporal, queue: queue, store: s.store, log: s.log}
}

// errEngineDown answers a schedule write the workflow engine refused.
var errEngineDown = &models.Error{Code: models.EUNAVAILABLE, Title: "Service Unavailable",
	Detail: "the workflow engine did not accept the schedule; nothing was changed, try again later"}

// write runs a store write with the mirror as its SyncFunc. The Temporal
// change happens inside the write's transaction; when the write fails after
// it (the commit), the change is undone, so that nothing is half-written.
//
// The organization's time zone (the schedule's calendar) is read first,
// outside the write's transaction: read from inside it, on a second
// connection while the transaction holds one, concurrent writes could take
// every connection of the pool (SQLite's has 4) and each wait for another
// until its timeout.
func (m *scheduleMirror) write(ctx context.Context, orgID int64, write func(notification.SyncFunc) error) error {
	if err := m.reachable(ctx); err != nil {
		return err
	}
	if err := m.loadTimeZone(ctx, orgID); err != nil {
		return err
	}
	var done bool
	var prev, next *notification.NotificationSchedule
	err := write(func(ctx context.Context, p, n *notification.NotificationSchedule) error {
		if err := m.apply(ctx, p, n); err != nil {
			m.log.Warn("notification schedule not mirrored in Temporal", "error", err)
			return errEngineDown
		}
		done, prev, next = true, p, n
		return nil
	})
	if err != nil && done {
		if uerr := m.apply(context.WithoutCancel(ctx), next, prev); uerr != nil {
			m.log.Error("notification schedule write failed and its Temporal change could not be undone", "error", uerr, "write_error", err)
		}
	}
	return err
}

// loadTimeZone reads the organization's time zone, the calendar of its
// schedules, for the writes that follow (before their transactions: see
// write).
func (m *scheduleMirror) loadTimeZone(ctx context.Context, orgID int64) error {
	org, err := m.store.Orgs.Get(ctx, orgID)
	if err != nil {
		return err
	}
	m.timeZone = org.TimeZone
	return nil
}

// engineCheckWait bounds the reachability check of the workflow engine.
const engineCheckWait = 2 * time.Second

// reachable asks the workflow engine whether it answers, within
// engineCheckWait, and returns errEngineDown when it does not: a schedule
// change then answers 503 at once, without holding a database transaction
// (and its connection) open while the engine's client waits out its own
// timeout.
func (m *scheduleMirror) reachable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, engineCheckWait)
	defer cancel()
	if _, err := m.c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		m.log.Warn("the workflow engine does not answer", "error", err)
		return errEngineDown
	}
	return nil
}

// apply makes Temporal match next: create (prev nil), delete (next nil) or
// update.
func (m *scheduleMirror) apply(ctx context.Context, prev, next *notification.NotificationSchedule) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var notFound *serviceerror.NotFound
	if next == nil {
		err := m.c.ScheduleClient().GetHandle(ctx, notification.NotificationScheduleID(prev.ID)).Delete(ctx)
		if errors.As(err, &notFound) {
			return nil
		}
		return err
	}
	opts, err := m.options(ctx, next)
	if err != nil {
		return err
	}
	if prev != nil {
		err = m.c.ScheduleClient().GetHandle(ctx, opts.ID).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				sched := in.Description.Schedule
				sched.Spec, sched.Action = &opts.Spec, opts.Action
				if sched.State == nil {
					sched.State = &client.ScheduleState{}
				}
				sched.State.Paused, sched.State.Note = opts.Paused, opts.Note
				return &client.ScheduleUpdate{Schedule: &sched}, nil
			},
		})
		if !errors.As(err, &notFound) {
			return err
		}
		// The Temporal Schedule is gone (a wiped dev server): make it again.
	}
	_, err = m.c.ScheduleClient().Create(ctx, opts)
	return err
}

// options are the Temporal Schedule of sc.
func (m *scheduleMirror) options(ctx context.Context, sc *notification.NotificationSchedule) (client.ScheduleOptions, error) {
	settings := sc.Settings
	t, err := settings.Check("schedule_settings")
	if err != nil {
		return client.ScheduleOptions{}, err
	}
	note := "paused"
	if sc.IsEnabled {
		note = "enabled"
	}
	return client.ScheduleOptions{
		ID:   notification.NotificationScheduleID(sc.ID),
		Spec: scheduleSpec(t, m.timeZone),
		Action: &client.ScheduleWorkflowAction{
			ID:        "notify-" + models.FormatID(sc.ID),
			Workflow:  workflows.NotifyWorkflowName,
			Args:      []any{workflows.NotifyInput{OrgID: sc.OrgID, ScheduleID: sc.ID}},
			TaskQueue: m.queue,
			TypedSearchAttributes: temporal.NewSearchAttributes(
				workflows.AttrOrgID.ValueSet(models.FormatID(sc.OrgID)),
			),
			StaticSummary: fmt.Sprintf("Notification schedule %d", sc.ID),
		},
		Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
		CatchupWindow: scheduleCatchup,
		Paused:        !sc.IsEnabled,
		Note:          note,
	}, nil
}

// trigger starts a run of sc now (run-now): it waits for a run in
// progress. A Temporal Schedule found missing (a wiped dev server) is made
// again from the row first.
func (m *scheduleMirror) trigger(ctx context.Context, sc *notification.NotificationSchedule) error {
	if err := m.reachable(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	h := m.c.ScheduleClient().GetHandle(ctx, notification.NotificationScheduleID(sc.ID))
	opts := client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE}
	err := h.Trigger(ctx, opts)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		if err = m.apply(ctx, nil, sc); err == nil {
			err = h.Trigger(ctx, opts)
		}
	}
	if err != nil {
		m.log.Warn("notification schedule not triggered", "schedule_id", sc.ID, "error", err)
		return errEngineDown
	}
	return nil
}

// runTimes are a schedule's last and next run as Temporal knows them.
type runTimes struct {
	last, next *time.Time
}

// times describes the Temporal Schedules of ids, a few at a time. A
// schedule Temporal cannot describe gets no times.
func (m *scheduleMirror) times(ctx context.Context, ids []int64) map[int64]runTimes {
	out := make(map[int64]runTimes, len(ids))
	if m == nil || len(ids) == 0 || m.reachable(ctx) != nil {
		return out // no times rather than a wait per schedule
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			d, err := m.c.ScheduleClient().GetHandle(dctx, notification.NotificationScheduleID(id)).Describe(dctx)
			if err != nil {
				m.log.Warn("notification schedule not described", "schedule_id", id, "error", err)
				return
			}
			var rt runTimes
			for _, a := range d.Info.RecentActions {
				if t := a.ActualTime.UTC(); rt.last == nil || t.After(*rt.last) {
					rt.last = &t
				}
			}
			paused := d.Schedule.State != nil && d.Schedule.State.Paused
			if len(d.Info.NextActionTimes) > 0 && !paused {
				t := d.Info.NextActionTimes[0].UTC()
				rt.next = &t
			}
			mu.Lock()
			out[id] = rt
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}
