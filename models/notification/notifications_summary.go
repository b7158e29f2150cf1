package notification

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models/sqldb"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// SummaryAddresses are the addresses of a run's template that receive the
// run's summary: the mail.to and mail.cc entries that are addresses, and the
// sms.to entries that are numbers. Recipient macros (SELF, Manager) are left
// out: every member gets their own message whatever the lists say.
type SummaryAddresses struct {
	MailTo, MailCc, SMS []string
}

// Summary returns the template's summary addresses, each once.
func (t *RunTemplate) Summary() SummaryAddresses {
	var out SummaryAddresses
	seen := map[string]bool{}
	add := func(dst *[]string, list []string, channel string) {
		for _, a := range list {
			a = strings.TrimSpace(a)
			if _, macro := recipientMacro(a); macro || a == "" || seen[channel+strings.ToLower(a)] {
				continue
			}
			seen[channel+strings.ToLower(a)] = true
			*dst = append(*dst, a)
		}
	}
	if t.Mail != nil {
		add(&out.MailTo, t.Mail.To, ChannelMail)
		add(&out.MailCc, t.Mail.Cc, ChannelMail)
	}
	if t.SMS != nil {
		add(&out.SMS, t.SMS.To, ChannelSMS)
	}
	return out
}

// summaryRecipient keys a summary delivery: one mail for every to and cc
// address, one SMS per number.
func summaryRecipient(channel, address string) string {
	if channel == ChannelMail {
		return "summary:mail"
	}
	return "summary:sms:" + address
}

// PrepareSummary adds to a finished run its summary deliveries, after the
// member deliveries (seq from Total+1): one mail to every address of the
// template's mail.to (cc: mail.cc), one SMS to each number of sms.to. It
// returns the seq range [from, to) they take. Preparing again adds nothing
// and returns the same range, so a summary is never sent twice. A run that
// is not COMPLETED gets no summary (an empty range).
func (s *NotificationStore) PrepareSummary(ctx context.Context, runID int64) (from, to int64, err error) {
	run, err := s.GetRun(ctx, runID)
	if err != nil {
		return 0, 0, err
	}
	from = run.Total + 1
	if run.Status != RunCompleted {
		return from, from, nil
	}
	addr := run.Template.Summary()
	now := time.Now().UTC()
	var planned []Delivery
	add := func(channel, address string) {
		planned = append(planned, Delivery{
			RunID: run.ID, Seq: from + int64(len(planned)), NotificationID: run.NotificationID,
			Recipient: summaryRecipient(channel, address), ScheduledAt: run.ScheduledAt,
			Kind: DeliverySummary, Channel: channel, Address: address, State: DeliveryPending, UpdatedAt: now,
		})
	}
	if len(addr.MailTo)+len(addr.MailCc) > 0 {
		add(ChannelMail, summaryMailAddress(addr))
	}
	for _, n := range addr.SMS {
		add(ChannelSMS, n)
	}
	to = from + int64(len(planned))
	if len(planned) == 0 {
		return from, to, nil
	}
	if err := sqldb.InTxOnce(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		exists, err := tx.NewSelect().Model((*Delivery)(nil)).Where("run_id = ? AND kind = ?", run.ID, DeliverySummary).Exists(ctx)
		if err != nil || exists {
			return err
		}
		_, err = tx.NewInsert().Model(&planned).Exec(ctx)
		return err
	}); err != nil && !sqldb.IsUniqueViolation(err) { // a violation: another attempt added them first
		return 0, 0, fmt.Errorf("prepare run summary: %w", err)
	}
	return from, to, nil
}

// summaryMailAddress shows the summary mail's recipients in its delivery:
// "a@x, b@y; cc: c@z".
func summaryMailAddress(a SummaryAddresses) string {
	out := strings.Join(a.MailTo, ", ")
	if len(a.MailCc) > 0 {
		if out != "" {
			out += "; "
		}
		out += "cc: " + strings.Join(a.MailCc, ", ")
	}
	return out
}

// ScheduleName returns the schedule's name, "" when it was deleted.
func (s *NotificationStore) ScheduleName(ctx context.Context, orgID, id int64) (string, error) {
	var name string
	err := s.db.NewSelect().Model((*NotificationSchedule)(nil)).Column("name").Where("org_id = ? AND id = ?", orgID, id).Limit(1).Scan(ctx, &name)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("select schedule name: %w", err)
	}
	return name, nil
}
