package activities

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"iam/models/hooks"
	"iam/models/store"
)

// Event hook metrics (docs/event-hooks.md), served by the worker on /metrics.
const (
	// MetricHookDeliveries counts delivery attempts by outcome: succeeded,
	// retrying (failed, another attempt scheduled), failed (the schedule
	// spent).
	MetricHookDeliveries = "iam_event_hook_deliveries"
	// MetricHookLatency times each attempt's request.
	MetricHookLatency = "iam_event_hook_request_duration"
	// MetricHookCommitToAttempt times a delivery's first attempt from its
	// event's commit.
	MetricHookCommitToAttempt = "iam_event_hook_commit_to_first_attempt"
)

// Defaults of EventHooks.
const (
	// DefaultHookConcurrency is 1: a hook's deliveries arrive in event
	// order when they succeed first try.
	DefaultHookConcurrency = 1
	// hookBatch is how many due deliveries one read of the due list
	// returns (beyond those the send window already started).
	hookBatch         = 256
	DefaultHookPoll   = 200 * time.Millisecond
	DefaultHookRunFor = time.Minute
	// hookDispatchBatch is how many audit events one dispatch reads.
	hookDispatchBatch = 1000
	// hookReload is how often a running dispatcher rereads its hook (a
	// PATCH that disables it or changes its URL).
	hookReload = 2 * time.Second
	// hookHeartbeat is how often a run heartbeats.
	hookHeartbeat = 3 * time.Second
)

// EventHooks delivers event hooks' deliveries: one DeliverEventHook
// activity at a time per hook (its EventHookDelivery workflow's), which
// for RunFor turns the hook's new audit events into deliveries, sends the
// due ones Concurrency at a time and records each attempt.
type EventHooks struct {
	Store *store.Store
	// Client sends the requests (NewHookClient: the address check, no
	// redirects, the timeout).
	Client *http.Client
	// Concurrency is how many requests a hook has in flight at most.
	Concurrency int
	// Policy is the retry schedule and when a failing hook is disabled.
	Policy hooks.Policy
	// Poll is how often an idle dispatcher looks for new events; RunFor how
	// long one activity runs before handing back to its workflow.
	Poll, RunFor time.Duration
}

// EventHookRun is what one DeliverEventHook did.
type EventHookRun struct {
	// Stop: the hook is deleted or disabled; its workflow ends.
	Stop bool
	// Backlog counts its pending deliveries when it returned.
	Backlog int64
	// Attempts counts the attempts it made.
	Attempts int
}

// EnabledEventHooks lists every enabled hook, for the supervisor that
// makes sure each has its workflow.
func (a *EventHooks) EnabledEventHooks(ctx context.Context) ([]hooks.HookRef, error) {
	return a.Store.Hooks.Enabled(ctx)
}

func (a *EventHooks) defaults() (conc int, poll, runFor time.Duration, pol hooks.Policy) {
	conc, poll, runFor, pol = a.Concurrency, a.Poll, a.RunFor, a.Policy
	if conc <= 0 {
		conc = DefaultHookConcurrency
	}
	if poll <= 0 {
		poll = DefaultHookPoll
	}
	if runFor <= 0 {
		runFor = DefaultHookRunFor
	}
	if pol.Schedule == nil {
		pol = hooks.DefaultPolicy
	}
	return
}

// DeliverEventHook runs the hook's dispatcher for RunFor (heartbeating):
// new events become deliveries, due deliveries are sent in the order they
// fell due (event order for first attempts) through a window of
// Concurrency requests in flight, and their attempts are recorded as they
// end (sendWindow). A worker that dies leaves the deliveries whose
// attempts were not recorded due: the next run sends them again (with the
// same webhook-id), nothing else.
//
// A run whose context ends (its worker stopping) returns what it did, not
// an error: what it had not recorded stays due for the next run.
func (a *EventHooks) DeliverEventHook(ctx context.Context, hookID int64) (_ EventHookRun, err error) {
	conc, poll, runFor, pol := a.defaults()
	var run EventHookRun
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = nil
		}
	}()
	st := a.Store.Hooks
	h, err := st.LoadForDelivery(ctx, hookID)
	if errors.Is(err, hooks.ErrHookNotFound) {
		return EventHookRun{Stop: true}, nil
	}
	if err != nil {
		return run, err
	}
	if _, err = st.PruneDeliveries(ctx, hookID, time.Now().Add(-hooks.DeliveryRetention), 1000); err != nil {
		return run, err
	}
	r := &hookRun{a: a, h: h, loaded: time.Now(), poll: poll}
	defer heartbeatOnClock(ctx, hookHeartbeat, func() any { return r.attempts.Load() })()
	r.w = newSendWindow(ctx, a, h, conc, pol)
	run.Stop, err = r.loop(ctx, r.loaded.Add(runFor))
	rec, werr := r.w.close()
	run.Attempts = int(r.attempts.Load())
	run.Stop = run.Stop || rec.Disabled
	if err == nil {
		err = werr
	}
	if err != nil {
		return run, err
	}
	if run.Backlog, err = st.Backlog(ctx, hookID); err != nil {
		return run, err
	}
	return run, nil
}

// hookRun is one DeliverEventHook run's state: the hook as last loaded
// (Dispatch reloads it when its organization has new events: a rotated
// secret's among them) and the window its deliveries go through.
type hookRun struct {
	a        *EventHooks
	h        *hooks.Hook
	loaded   time.Time
	poll     time.Duration
	w        *sendWindow
	attempts atomic.Int64
}

// loop turns new events into deliveries and feeds the due ones to the
// window until deadline. It returns true when the hook is gone or
// disabled.
func (r *hookRun) loop(ctx context.Context, deadline time.Time) (bool, error) {
	st := r.a.Store.Hooks
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if stop, err := r.w.stopped(); stop {
			return err == nil, err
		}
		if time.Since(r.loaded) > hookReload {
			h, err := st.LoadForDelivery(ctx, r.h.ID)
			if errors.Is(err, hooks.ErrHookNotFound) {
				return true, nil
			} else if err != nil {
				return false, err
			}
			r.h, r.loaded = h, time.Now()
		}
		if !r.h.Enabled {
			return true, nil
		}
		read, err := st.Dispatch(ctx, r.h, hookDispatchBatch)
		if err != nil {
			return false, err
		}
		mark := r.w.commitMark()
		due, err := st.Due(ctx, r.h.ID, time.Now(), hookBatch+r.w.remembered())
		if err != nil {
			return false, err
		}
		if due = r.w.fresh(due, mark); len(due) == 0 {
			if read == 0 {
				sleep(ctx, r.poll)
			}
			continue
		}
		keys, err := st.SigningKeys(r.h, time.Now())
		if err != nil {
			return false, err
		}
		for _, d := range due {
			if !r.w.start(d, r.h.URL, keys, deadline) {
				break
			}
			r.attempts.Add(1)
		}
	}
	return false, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
