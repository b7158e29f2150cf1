package worker

import (
	"log/slog"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"golang.org/x/time/rate"

	"iam/activities"
	"iam/models/store"
	"iam/notify"
	"iam/workflows"
)

// NotifyDeps are the notify worker's senders and limits.
type NotifyDeps struct {
	Mail notify.Mailer
	SMS  notify.SMSGateway
	// ActivitiesPerSecond caps the send steps the notify task queue hands
	// out per second, across every worker (Temporal's
	// TaskQueueActivitiesPerSecond); 0 leaves it unlimited.
	ActivitiesPerSecond float64
	// MessagesPerSecond paces the messages of this process; 0 leaves them
	// unpaced.
	MessagesPerSecond float64
	// Concurrency is how many messages one send step has in flight.
	Concurrency int
	// ClaimBatch is how many deliveries a sender claims per ledger write:
	// more is faster, and leaves more deliveries uncertain after a crash
	// (at most Concurrency × ClaimBatch).
	ClaimBatch int
	Log        *slog.Logger
}

// NewNotify returns the worker of the notification send step: the queue
// paired with jobsQueue (workflows.NotifyTaskQueueFor), activities only,
// rate-limited. dev and worker run it beside New's.
func NewNotify(c client.Client, jobsQueue string, store *store.Store, n NotifyDeps) sdkworker.Worker {
	w := sdkworker.New(c, workflows.NotifyTaskQueueFor(jobsQueue), sdkworker.Options{
		DisableWorkflowWorker:        true,
		TaskQueueActivitiesPerSecond: n.ActivitiesPerSecond,
		// One send step at a time per process, its Concurrency senders
		// matching the SMTP connections: no claimed delivery waits for a
		// connection, which keeps a crash's uncertain deliveries few. More
		// workers send more chunks at once.
		MaxConcurrentActivityExecutionSize: 1,
	})
	a := &activities.Notifications{Store: store, Mail: n.Mail, SMS: n.SMS, Concurrency: n.Concurrency, ClaimBatch: n.ClaimBatch, Log: n.Log}
	if n.MessagesPerSecond > 0 {
		a.Limiter = rate.NewLimiter(rate.Limit(n.MessagesPerSecond), max(1, int(n.MessagesPerSecond)))
	}
	w.RegisterActivity(a)
	return w
}
