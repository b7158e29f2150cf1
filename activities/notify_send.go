package activities

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"iam/models/notification"
	"iam/models/sqldb"
	"iam/notify"
)

// SendNotificationChunk sends the open deliveries of a run with seq in
// [From, To). It never sends a delivery twice, whatever fails and whenever:
//
//  1. A delivery is claimed (pending → sending, under this attempt's
//     claim) in the same transaction that records the outcomes of the
//     previous few; only then is it sent.
//  2. After the send the outcome is recorded: sent, failed, uncertain, or
//     pending again for a temporary failure (nothing was delivered).
//  3. A retried step (this activity retried after a crash, a worker killed
//     mid-run) first marks uncertain every delivery still sending under
//     another claim: the dead attempt may have sent it between the SMTP
//     server's acceptance and the database write, and a second send could
//     deliver it twice. Such deliveries are never retried; the delivery
//     log says so. The window is at most Concurrency × ClaimBatch
//     deliveries per chunk, and the messages carry a stable Message-ID
//     (reference for SMS) derived from the delivery's key.
//
// The step heartbeats after every batch, so a dead worker is noticed within
// the heartbeat timeout and the chunk retried elsewhere.
func (a *Notifications) SendNotificationChunk(ctx context.Context, in ChunkInput) (ChunkResult, error) {
	// Heartbeat on a clock, not per message: a live worker facing a slow
	// server must not look dead, or its claimed deliveries would turn
	// uncertain.
	var done atomic.Int64
	defer heartbeatOnClock(ctx, heartbeatEvery, func() any { return done.Load() })()
	return DeliverChunk(ctx, a, in, func(n int64) { done.Store(n) })
}

// heartbeatEvery is how often the send step heartbeats.
const heartbeatEvery = 2 * time.Second

// DeliverChunk is the send step of a without Temporal (benchmarks): progress
// receives the number of deliveries handled so far. It is a function, not a
// method, so that registering Notifications does not take it for an
// activity.
func DeliverChunk(ctx context.Context, a *Notifications, in ChunkInput, progress func(done int64)) (ChunkResult, error) {
	var res ChunkResult
	ns := a.Store.Notifications
	run, err := ns.GetRun(ctx, in.Run.RunID)
	if err != nil {
		return res, temporalError(err)
	}
	if want := map[bool]string{false: notification.RunRunning, true: notification.RunCompleted}[in.Summary]; run.Status != want {
		return res, nil // members are sent while the run runs, its summary once it is done
	}
	open, err := ns.OpenDeliveries(ctx, run.ID, in.From, in.To)
	if err != nil {
		return res, err
	}
	claim := sqldb.NewID()
	var stale []notification.Delivery
	var pending []int64
	var userIDs []int64
	kind := map[bool]string{false: notification.DeliveryMember, true: notification.DeliverySummary}[in.Summary]
	for _, d := range open {
		if d.Kind != kind { // a member chunk's range may reach past the members
			continue
		}
		if d.State == notification.DeliverySending {
			stale = append(stale, d)
		} else {
			pending = append(pending, d.Seq)
			if d.Kind == notification.DeliveryMember {
				userIDs = append(userIDs, d.UserID)
			}
		}
	}
	if err = ns.AbandonClaims(ctx, run.ID, claim, stale); err != nil {
		return res, err
	}
	res.Uncertain += int64(len(stale))
	if len(pending) == 0 {
		return res, nil
	}
	var msg *message
	if in.Summary {
		var sum *summary
		if sum, err = newSummary(ctx, a.Store, run); err != nil {
			return res, err
		}
		msg = &message{run: run, summary: sum}
	} else if msg, err = newMessage(ctx, a.Store, run); err != nil {
		return res, err
	}
	users, err := ns.Recipients(ctx, run.OrgID, userIDs)
	if err != nil {
		return res, err
	}
	byID := make(map[int64]*notification.Recipient, len(users))
	for i := range users {
		byID[users[i].ID] = &users[i]
	}

	queue := make(chan int64, len(pending))
	for _, seq := range pending {
		queue <- seq
	}
	close(queue)
	led := newLedger(ctx, ns, run.ID, claim)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		done     atomic.Int64
	)
	concurrency := a.Concurrency
	if concurrency <= 0 {
		concurrency = 4
	}
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := a.sender(ctx, led, msg, byID, queue, func(n int) { progress(done.Add(int64(n))) })
			mu.Lock()
			defer mu.Unlock()
			res = res.Add(r)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	led.close()
	if firstErr != nil {
		return res, firstErr
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// sender claims deliveries from queue a few at a time, sends them and
// records what came of them, until the queue is empty or ctx ends.
func (a *Notifications) sender(ctx context.Context, led *ledger, msg *message,
	users map[int64]*notification.Recipient, queue <-chan int64, progress func(int)) (ChunkResult, error) {
	var res ChunkResult
	var outcomes []notification.DeliveryOutcome
	batch := a.ClaimBatch
	if batch <= 0 {
		batch = 4
	}
	for {
		var next []int64
		if ctx.Err() == nil {
			next = take(queue, batch)
		}
		// Pace before claiming, so that a claimed delivery is sent at once.
		if a.Limiter != nil && len(next) > 0 && a.wait(ctx, len(next)) != nil {
			next = nil // left pending for the next attempt
		}
		// Recorded even when ctx ended mid-batch (the ledger's writes
		// outlive it): the messages were sent.
		claimed, err := led.step(outcomes, next)
		if err != nil {
			return res, err
		}
		if len(outcomes) > 0 {
			progress(len(outcomes))
		}
		outcomes = nil
		if len(next) == 0 {
			return res, nil
		}
		for i := range claimed {
			d := &claimed[i]
			o := a.deliver(ctx, msg, d, users[d.UserID])
			metrics(ctx).WithTags(map[string]string{TagOutcome: o.Outcome}).Counter(MetricDeliveries).Inc(1)
			switch o.Outcome {
			case notification.DeliverySent:
				res.Sent++
			case notification.DeliveryFailed:
				res.Failed++
			case notification.DeliveryUncertain:
				res.Uncertain++
			case notification.DeliveryTemporary:
				if d.Attempts >= notification.MaxDeliveryAttempts {
					res.Failed++
				} else {
					res.Pending++
				}
			}
			outcomes = append(outcomes, o)
		}
	}
}

// take returns up to n values from queue without waiting, at least one
// unless it is drained.
func take(queue <-chan int64, n int) []int64 {
	var out []int64
	for len(out) < n {
		seq, ok := <-queue
		if !ok {
			break
		}
		out = append(out, seq)
	}
	return out
}

// deliver sends one delivery and says what came of it.
func (a *Notifications) deliver(ctx context.Context, msg *message, d *notification.Delivery, u *notification.Recipient) notification.DeliveryOutcome {
	out := notification.DeliveryOutcome{Delivery: d}
	if d.Kind == notification.DeliverySummary {
		return a.deliverSummary(ctx, msg, d)
	}
	if u == nil {
		out.Outcome, out.Detail = notification.DeliveryFailed, "the user no longer exists"
		return out
	}
	var err error
	switch d.Channel {
	case notification.ChannelMail:
		if a.Mail == nil || msg.run.Template.Mail == nil {
			out.Outcome, out.Detail = notification.DeliveryFailed, "no mail server is configured"
			return out
		}
		err = a.Mail.Send(ctx, msg.mail(d, u))
	case notification.ChannelSMS:
		if a.SMS == nil || msg.run.Template.SMS == nil {
			out.Outcome, out.Detail = notification.DeliveryFailed, "no SMS gateway is configured"
			return out
		}
		err = a.SMS.SendSMS(ctx, msg.text(d, u))
	default:
		out.Outcome, out.Detail = notification.DeliveryFailed, fmt.Sprintf("unknown channel %q", d.Channel)
		return out
	}
	return outcome(out, err)
}

// deliverSummary sends a summary delivery.
func (a *Notifications) deliverSummary(ctx context.Context, msg *message, d *notification.Delivery) notification.DeliveryOutcome {
	out := notification.DeliveryOutcome{Delivery: d}
	var err error
	switch {
	case d.Channel == notification.ChannelMail && a.Mail != nil:
		err = a.Mail.Send(ctx, msg.summary.mail(msg.run, d))
	case d.Channel == notification.ChannelSMS && a.SMS != nil:
		err = a.SMS.SendSMS(ctx, msg.summary.textFor(d))
	case d.Channel == notification.ChannelMail:
		out.Outcome, out.Detail = notification.DeliveryFailed, "no mail server is configured"
		return out
	case d.Channel == notification.ChannelSMS:
		out.Outcome, out.Detail = notification.DeliveryFailed, "no SMS gateway is configured"
		return out
	default:
		out.Outcome, out.Detail = notification.DeliveryFailed, fmt.Sprintf("unknown channel %q", d.Channel)
		return out
	}
	return outcome(out, err)
}

// outcome sorts the error of a send into the delivery's outcome.
func outcome(out notification.DeliveryOutcome, err error) notification.DeliveryOutcome {
	switch notify.Classify(err) {
	case 0:
		out.Outcome = notification.DeliverySent
	case notify.Permanent:
		out.Outcome, out.Detail = notification.DeliveryFailed, errText(err)
	case notify.Uncertain:
		out.Outcome, out.Detail = notification.DeliveryUncertain, errText(err)
	default:
		out.Outcome, out.Detail = notification.DeliveryTemporary, errText(err)
	}
	return out
}

// wait takes n tokens from the limiter, one at a time (n may exceed its
// burst).
func (a *Notifications) wait(ctx context.Context, n int) error {
	for range n {
		if err := a.Limiter.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// errText bounds an error's text for the log.
func errText(err error) string {
	s := err.Error()
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
