package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"iam/models"
	"iam/models/notification"
	"iam/models/store"
	"iam/notify"
)

// SendNotificationSummary sends the summary of a finished run to the
// template's own addresses (mail.to and mail.cc get one mail, each number
// of sms.to one SMS): the schedule, the scheduled time and the counts. The
// summary deliveries go through the same ledger as the members' messages,
// so a retried step never sends one twice. A delivery that failed for now is
// tried again by the step's retry (an error), up to
// models.MaxDeliveryAttempts attempts.
func (a *Notifications) SendNotificationSummary(ctx context.Context, ref RunRef) (ChunkResult, error) {
	from, to, err := a.Store.Notifications.PrepareSummary(ctx, ref.RunID)
	if err != nil {
		return ChunkResult{}, temporalError(err)
	}
	if from == to {
		return ChunkResult{}, nil
	}
	res, err := a.SendNotificationChunk(ctx, ChunkInput{Run: ref, From: from, To: to, Summary: true})
	if err != nil {
		return res, err
	}
	if res.Pending > 0 {
		return res, fmt.Errorf("%d summary messages failed for now; trying again", res.Pending)
	}
	return res, nil
}

// summary is the text of a run's summary.
type summary struct {
	subject, text, sms string
}

// newSummary writes the summary of a finished run.
func newSummary(ctx context.Context, store *store.Store, run *notification.NotificationRun) (*summary, error) {
	name, err := store.Notifications.ScheduleName(ctx, run.OrgID, run.NotificationID)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = "(deleted schedule)"
	}
	loc, err := time.LoadLocation(run.Template.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	when := run.ScheduledAt.In(loc).Format("2006-01-02 15:04 MST")
	counts := fmt.Sprintf("%d sent, %d failed, %d uncertain, %d skipped", run.Sent, run.Failed, run.Uncertain, run.Skipped)
	var b strings.Builder
	fmt.Fprintf(&b, "The notification schedule %q ran.\n\n", name)
	fmt.Fprintf(&b, "Scheduled time: %s\n", when)
	fmt.Fprintf(&b, "Template: %s\n", run.Template.Name)
	fmt.Fprintf(&b, "Members messaged: %d (%d messages)\n", run.Recipients, run.Total)
	fmt.Fprintf(&b, "Sent: %d\nFailed: %d\nUncertain (may have been delivered; not sent again): %d\n", run.Sent, run.Failed, run.Uncertain)
	fmt.Fprintf(&b, "Skipped (already enrolled or not active): %d\n", run.Skipped)
	return &summary{
		subject: fmt.Sprintf("Notification run %q at %s: %s", name, when, counts),
		text:    b.String(),
		sms:     fmt.Sprintf("%s: run %q at %s: %s", run.Template.OrgName, name, when, counts),
	}, nil
}

// summaryMail is the summary mail of delivery d: to mail.to, cc mail.cc (or
// to mail.cc alone when mail.to has no address).
func (s *summary) mail(run *notification.NotificationRun, d *notification.Delivery) *notify.Message {
	addr := run.Template.Summary()
	to, cc := addr.MailTo, addr.MailCc
	if len(to) == 0 {
		to, cc = cc, nil
	}
	return &notify.Message{
		To: to, Cc: cc,
		Subject:   s.subject,
		Text:      s.text,
		Severity:  notify.SeverityMedium,
		MessageID: deliveryKey(d) + "@iam",
		Headers: map[string]string{
			"X-Iam-Notification": models.FormatID(d.NotificationID),
			"X-Iam-Run":          models.FormatID(d.RunID),
			"X-Iam-Summary":      "1",
		},
	}
}

// text is the summary SMS of delivery d.
func (s *summary) textFor(d *notification.Delivery) notify.SMS {
	return notify.SMS{To: d.Address, Body: s.sms, Reference: deliveryKey(d)}
}
