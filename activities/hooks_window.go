package activities

import (
	"context"
	"sync"
	"time"

	"iam/models/hooks"
)

// sendWindow sends a hook's deliveries with at most conc requests in
// flight, starting the next as soon as one ends (not in rounds that wait
// for their slowest request), and records the attempts as they end: a
// recorder writes whatever ended while its previous write ran in one
// transaction (a group commit), so that a worker that dies leaves at most
// the requests in flight and those of the write under way unrecorded.
//
// A delivery stays due in the database until its attempt is recorded, so
// the window remembers the ones it started: start skips those, and fresh
// drops them from a due list read before their attempt's record committed.
type sendWindow struct {
	ctx     context.Context
	a       *EventHooks
	pol     hooks.Policy
	slots   chan struct{}
	results chan hooks.Outcome
	sending sync.WaitGroup
	done    chan struct{}

	mu sync.Mutex
	// started maps a delivery the window started to the recorder's commit
	// number that recorded its attempt (0 while not recorded yet).
	started map[int64]uint64
	commits uint64
	total   hooks.Recorded
	err     error
}

func newSendWindow(ctx context.Context, a *EventHooks, h *hooks.Hook, conc int, pol hooks.Policy) *sendWindow {
	w := &sendWindow{ctx: ctx, a: a, pol: pol, slots: make(chan struct{}, conc),
		results: make(chan hooks.Outcome, conc), done: make(chan struct{}), started: map[int64]uint64{}}
	go w.record(*h)
	return w
}

// commitMark is the recorder's commit count: a due list read after it
// was taken reflects every attempt recorded up to it.
func (w *sendWindow) commitMark() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.commits
}

// fresh drops from due (read after mark was taken) the deliveries the
// window started whose attempts were not recorded by then, and forgets the
// ones recorded by then (due reflects them).
func (w *sendWindow) fresh(due []hooks.Delivery, mark uint64) []hooks.Delivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := due[:0]
	for _, d := range due {
		if _, ok := w.started[d.ID]; !ok {
			out = append(out, d)
		}
	}
	for id, c := range w.started {
		if c != 0 && c <= mark {
			delete(w.started, id)
		}
	}
	return out
}

// remembered is how many started deliveries the window still tracks.
func (w *sendWindow) remembered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.started)
}

// stopped reports whether nothing more should start: a write failed or
// the hook was disabled.
func (w *sendWindow) stopped() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil || w.total.Disabled, w.err
}

// start sends d once a slot is free. It returns false, starting nothing,
// once ctx ends, deadline passes or the window stopped.
func (w *sendWindow) start(d hooks.Delivery, url string, keys [][]byte, deadline time.Time) bool {
	select {
	case w.slots <- struct{}{}:
	case <-w.ctx.Done():
		return false
	}
	if stop, _ := w.stopped(); stop || w.ctx.Err() != nil || time.Now().After(deadline) {
		<-w.slots
		return false
	}
	w.mu.Lock()
	w.started[d.ID] = 0
	w.mu.Unlock()
	w.sending.Add(1)
	go func() {
		defer func() { <-w.slots; w.sending.Done() }()
		m := metrics(w.ctx)
		begin := time.Now().UTC()
		if d.AttemptCount == 0 && !d.CreatedAt.IsZero() {
			m.Timer(MetricHookCommitToAttempt).Record(begin.Sub(d.CreatedAt))
		}
		r := send(w.ctx, w.a.Client, url, d.WebhookID(), keys, []byte(d.Payload), begin)
		m.Timer(MetricHookLatency).Record(r.latency)
		w.results <- hooks.Outcome{DeliveryID: d.ID, OK: r.ok(),
			Attempt: hooks.Attempt{Time: begin, StatusCode: r.status, LatencyMS: r.latency.Milliseconds(), Error: r.err}}
	}()
	return true
}

// record is the recorder: it writes the attempts that ended, each write
// taking all that ended while the one before it ran.
func (w *sendWindow) record(hk hooks.Hook) {
	defer close(w.done)
	m := metrics(w.ctx)
	for o := range w.results {
		batch := []hooks.Outcome{o}
	more:
		for {
			select {
			case o, ok := <-w.results:
				if !ok {
					break more
				}
				batch = append(batch, o)
			default:
				break more
			}
		}
		if _, err := w.stopped(); err != nil || w.ctx.Err() != nil {
			continue // drain: these stay due
		}
		res, err := w.a.Store.Hooks.Record(w.ctx, &hk, batch, w.pol)
		w.mu.Lock()
		if err != nil {
			w.err = err
			w.mu.Unlock()
			continue
		}
		w.commits++
		for _, o := range batch {
			w.started[o.DeliveryID] = w.commits
		}
		w.total.Succeeded += res.Succeeded
		w.total.Retrying += res.Retrying
		w.total.Failed += res.Failed
		w.total.Disabled = w.total.Disabled || res.Disabled
		w.mu.Unlock()
		for outcome, n := range map[string]int{hooks.StatusSucceeded: res.Succeeded, "retrying": res.Retrying, hooks.StatusFailed: res.Failed} {
			if n > 0 {
				m.WithTags(map[string]string{TagOutcome: outcome}).Counter(MetricHookDeliveries).Inc(int64(n))
			}
		}
	}
}

// close waits for the requests in flight and their records, and returns
// what was recorded and the first write error.
func (w *sendWindow) close() (hooks.Recorded, error) {
	w.sending.Wait()
	close(w.results)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total, w.err
}
