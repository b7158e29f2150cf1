package activities

import (
	"context"
	"time"

	"iam/models/notification"
)

// ledger writes the steps of a chunk's senders to the delivery table,
// several senders' steps in one transaction (group commit): a sender's
// outcomes are still recorded, and its next deliveries claimed, in the same
// transaction, and it sends nothing before that transaction commits.
type ledger struct {
	reqs chan *stepReq
	done chan struct{}
}

type stepReq struct {
	outcomes []notification.DeliveryOutcome
	next     []int64
	reply    chan stepReply
}

type stepReply struct {
	claimed []notification.Delivery
	err     error
}

// newLedger starts the writer of run's deliveries held by claim. Its
// writes outlive ctx's cancellation (by up to 30 s each): what was sent
// must be recorded.
func newLedger(ctx context.Context, ns *notification.NotificationStore, runID, claim int64) *ledger {
	l := &ledger{reqs: make(chan *stepReq), done: make(chan struct{})}
	go l.loop(context.WithoutCancel(ctx), ns, runID, claim)
	return l
}

// step records outcomes and claims the pending deliveries among next.
func (l *ledger) step(outcomes []notification.DeliveryOutcome, next []int64) ([]notification.Delivery, error) {
	r := &stepReq{outcomes: outcomes, next: next, reply: make(chan stepReply, 1)}
	l.reqs <- r
	rep := <-r.reply
	return rep.claimed, rep.err
}

// close stops the writer once every sender is done.
func (l *ledger) close() {
	close(l.reqs)
	<-l.done
}

func (l *ledger) loop(ctx context.Context, ns *notification.NotificationStore, runID, claim int64) {
	defer close(l.done)
	for first := range l.reqs {
		batch := []*stepReq{first}
	drain:
		for {
			select {
			case r, ok := <-l.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		var outcomes []notification.DeliveryOutcome
		var next []int64
		owner := map[int64]int{}
		for i, r := range batch {
			outcomes = append(outcomes, r.outcomes...)
			next = append(next, r.next...)
			for _, seq := range r.next {
				owner[seq] = i
			}
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		claimed, err := ns.Step(wctx, runID, claim, outcomes, next)
		cancel()
		replies := make([]stepReply, len(batch))
		for _, d := range claimed {
			i := owner[d.Seq]
			replies[i].claimed = append(replies[i].claimed, d)
		}
		for i, r := range batch {
			replies[i].err = err
			r.reply <- replies[i]
		}
	}
}
