package activities

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

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
	// hookBatch is how many due deliveries one round sends.
	hookBatch         = 256
	DefaultHookPoll   = 200 * time.Millisecond
	DefaultHookRunFor = time.Minute
	// hookDispatchBatch is how many audit events one dispatch reads.
	hookDispatchBatch = 1000
	// hookReload is how often a running dispatcher rereads its hook (a
	// PATCH that disables it or changes its URL).
	hookReload = 2 * time.Second
	// hookHeartbeat is how often a run heartbeats while a batch's requests
	// are under way.
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
// fell due (event order for first attempts), Concurrency at a time, and
// each batch's attempts are recorded in one transaction once its requests
// ended. A worker that dies mid-batch leaves that batch's deliveries due:
// the next run sends them again (with the same webhook-id), nothing else.
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
	loaded := time.Now()
	deadline := loaded.Add(runFor)
	for time.Now().Before(deadline) {
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, run.Attempts)
		}
		if ctx.Err() != nil {
			return run, ctx.Err()
		}
		if time.Since(loaded) > hookReload {
			if h, err = st.LoadForDelivery(ctx, hookID); errors.Is(err, hooks.ErrHookNotFound) {
				return EventHookRun{Stop: true}, nil
			} else if err != nil {
				return run, err
			}
			loaded = time.Now()
		}
		if !h.Enabled {
			run.Stop = true
			break
		}
		read, derr := st.Dispatch(ctx, h, hookDispatchBatch)
		if derr != nil {
			return run, derr
		}
		due, derr := st.Due(ctx, h.ID, time.Now(), max(hookBatch, conc))
		if derr != nil {
			return run, derr
		}
		if len(due) == 0 {
			if read == 0 {
				sleep(ctx, poll)
			}
			continue
		}
		res, serr := a.sendBatch(ctx, h, due, conc, pol, deadline)
		if serr != nil {
			return run, serr
		}
		run.Attempts += len(due)
		if res.Disabled {
			run.Stop = true
			break
		}
	}
	if run.Backlog, err = st.Backlog(ctx, hookID); err != nil {
		return run, err
	}
	return run, nil
}

// sendBatch sends due, started in their order with at most conc in flight
// (with conc 1 they arrive in that order), and records the attempts as
// they end: whatever ended while the previous write ran goes in the next
// (a group commit), so that a worker that dies leaves at most the requests
// in flight and those of the write under way unrecorded.
//
// It starts no request after deadline (those left stay due for the next
// run), so that a run against a receiver that never answers still ends
// within its StartToClose, and it heartbeats while the batch runs.
func (a *EventHooks) sendBatch(ctx context.Context, h *hooks.Hook, due []hooks.Delivery, conc int, pol hooks.Policy, deadline time.Time) (hooks.Recorded, error) {
	keys, err := a.Store.Hooks.SigningKeys(h, time.Now())
	if err != nil {
		return hooks.Recorded{}, err
	}
	if activity.IsActivity(ctx) {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(hookHeartbeat)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					activity.RecordHeartbeat(ctx)
				}
			}
		}()
	}
	url := h.URL
	m := metrics(ctx)
	results := make(chan hooks.Outcome, len(due))
	go func() {
		sem := make(chan struct{}, conc)
		var wg sync.WaitGroup
		for i := range due {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				break // the token, if taken, is never given back: nothing starts after
			}
			wg.Add(1)
			go func(d *hooks.Delivery) {
				defer func() { <-sem; wg.Done() }()
				start := time.Now().UTC()
				if d.AttemptCount == 0 && !d.CreatedAt.IsZero() {
					m.Timer(MetricHookCommitToAttempt).Record(start.Sub(d.CreatedAt))
				}
				r := send(ctx, a.Client, url, d.WebhookID(), keys, []byte(d.Payload), start)
				m.Timer(MetricHookLatency).Record(r.latency)
				results <- hooks.Outcome{DeliveryID: d.ID, OK: r.ok(),
					Attempt: hooks.Attempt{Time: start, StatusCode: r.status, LatencyMS: r.latency.Milliseconds(), Error: r.err}}
			}(&due[i])
		}
		wg.Wait()
		close(results)
	}()
	var total hooks.Recorded
	var firstErr error
	hk := *h
	for o := range results {
		batch := []hooks.Outcome{o}
	more:
		for {
			select {
			case o, ok := <-results:
				if !ok {
					break more
				}
				batch = append(batch, o)
			default:
				break more
			}
		}
		if firstErr != nil || ctx.Err() != nil {
			continue // drain; these stay due
		}
		res, err := a.Store.Hooks.Record(ctx, &hk, batch, pol)
		if err != nil {
			firstErr = err
			continue
		}
		total.Succeeded += res.Succeeded
		total.Retrying += res.Retrying
		total.Failed += res.Failed
		total.Disabled = total.Disabled || res.Disabled
		for outcome, n := range map[string]int{hooks.StatusSucceeded: res.Succeeded, "retrying": res.Retrying, hooks.StatusFailed: res.Failed} {
			if n > 0 {
				m.WithTags(map[string]string{TagOutcome: outcome}).Counter(MetricHookDeliveries).Inc(int64(n))
			}
		}
	}
	if firstErr != nil {
		return total, firstErr
	}
	if err := ctx.Err(); err != nil {
		return total, err
	}
	h.Enabled, h.FailingSince, h.DisabledReason = hk.Enabled, hk.FailingSince, hk.DisabledReason
	return total, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
