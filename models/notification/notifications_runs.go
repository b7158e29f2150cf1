package notification

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/identity"
	"iam/models/sqldb"
	"time"

	"github.com/uptrace/bun"
)

// Run states.
const (
	RunRunning   = "RUNNING"
	RunCompleted = "COMPLETED"
	// RunSkipped: the run sent nothing: another run already covered its
	// local time (daylight saving time repeated the hour).
	RunSkipped = "SKIPPED"
)

// NotificationRun is one run of a notification schedule: who it notifies
// is fixed when it is prepared (its deliveries), and so is the template
// it sends (a snapshot), so that a retried step renders the same message.
type NotificationRun struct {
	bun.BaseModel `bun:"table:notification_runs"`

	ID             int64       `bun:"id,pk"`
	OrgID          int64       `bun:"org_id"`
	NotificationID int64       `bun:"notification_id"`
	ScheduledAt    time.Time   `bun:"scheduled_at"`
	Slot           string      `bun:"slot"`
	Template       RunTemplate `bun:"template,type:json"`
	Status         string      `bun:"status"`
	Message        string      `bun:"message"`
	Total          int64       `bun:"total"`      // member deliveries
	Recipients     int64       `bun:"recipients"` // members messaged
	Skipped        int64       `bun:"skipped"`    // members left out: enrolled or not active
	Sent           int64       `bun:"sent"`
	Failed         int64       `bun:"failed"`
	Uncertain      int64       `bun:"uncertain"`
	CreatedAt      time.Time   `bun:"created_at"`
	FinishedAt     *time.Time  `bun:"finished_at"`
}

// RunTemplate is the snapshot of a template a run sends, with what
// rendering needs of its organization.
type RunTemplate struct {
	ID       int64         `json:"id,string"`
	Name     string        `json:"name"`
	Module   string        `json:"module"`
	Mail     *MailTemplate `json:"mail,omitempty"`
	SMS      *SMSTemplate  `json:"sms,omitempty"`
	OrgName  string        `json:"org_name"`
	TimeZone string        `json:"time_zone"`
}

// PrepareRunInput names a run: a schedule and the time it was scheduled
// for (the trigger time of a run now).
type PrepareRunInput struct {
	OrgID       int64
	ScheduleID  int64
	ScheduledAt time.Time
}

// ErrScheduleGone answers PrepareRun for a schedule deleted since its
// Temporal Schedule fired.
var ErrScheduleGone = models.NotFound("Schedule", "the notification schedule was deleted")

// SlotLayout writes a run's local time slot: the wall-clock minute in the
// organization's time zone.
const SlotLayout = "2006-01-02T15:04"

// PrepareRun creates the run of in with one delivery per recipient and
// channel, or returns the run that exists for it (a retried step). The
// recipients are the active members of the schedule's groups who have not
// enrolled; each gets mail when the template has a mail part and they an
// address, SMS likewise. A run whose local wall-clock minute another run
// of the schedule already had (the hour daylight saving time repeats, or a
// run now in the minute of another run) is written SKIPPED with no
// deliveries. ErrScheduleGone when the schedule no longer exists.
func (s *NotificationStore) PrepareRun(ctx context.Context, in PrepareRunInput) (*NotificationRun, error) {
	if run, err := s.findRun(ctx, s.db, in.ScheduleID, in.ScheduledAt); err == nil || models.ErrorCode(err) != models.ENOTFOUND {
		return run, err
	}
	sc, err := s.GetSchedule(ctx, in.OrgID, in.ScheduleID)
	if models.ErrorCode(err) == models.ENOTFOUND {
		return nil, ErrScheduleGone
	}
	if err != nil {
		return nil, err
	}
	org, err := identity.NewOrgStore(s.db).Get(ctx, in.OrgID)
	if err != nil {
		return nil, err
	}
	loc, err := time.LoadLocation(org.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	tpl := new(Template)
	if err = s.db.NewSelect().Model(tpl).Where("org_id = ? AND id = ?", in.OrgID, sc.TemplateID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("select template of schedule: %w", err)
	}
	members, err := s.Groups.MemberUserIDs(ctx, in.OrgID, sc.GroupIDs)
	if err != nil {
		return nil, err
	}
	groupMembers := int64(len(members))
	if members, err = notEnrolled(ctx, s.db, in.OrgID, members); err != nil {
		return nil, err
	}
	users, err := loadRecipients(ctx, s.db, in.OrgID, members)
	if err != nil {
		return nil, err
	}

	now := time.Now().UTC()
	run := &NotificationRun{
		ID: sqldb.NewID(), OrgID: in.OrgID, NotificationID: in.ScheduleID, ScheduledAt: in.ScheduledAt.UTC(),
		Template: RunTemplate{ID: tpl.ID, Name: tpl.Name, Module: tpl.Module, Mail: tpl.Mail, SMS: tpl.SMS, OrgName: org.Name, TimeZone: loc.String()},
		Status:   RunRunning, CreatedAt: now,
	}
	run.Slot = in.ScheduledAt.In(loc).Format(SlotLayout)
	deliveries := plannedDeliveries(run, users, now)
	run.Total = int64(len(deliveries))
	for i := range users {
		if users[i].Status == identity.UserActive {
			run.Recipients++
		}
	}
	run.Skipped = groupMembers - run.Recipients
	txErr := sqldb.InTxOnce(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if run.Slot != "" {
			taken, err := tx.NewSelect().Model((*NotificationRun)(nil)).
				Where("notification_id = ? AND slot = ?", run.NotificationID, run.Slot).Exists(ctx)
			if err != nil {
				return fmt.Errorf("select run slot: %w", err)
			}
			if taken {
				run.Slot, run.Status, run.Total, run.Recipients, run.Skipped, deliveries = "", RunSkipped, 0, 0, 0, nil
				run.Message = "another run already happened at this local time (daylight saving time repeated the hour)"
				run.FinishedAt = &now
			}
		}
		if _, err := tx.NewInsert().Model(run).Exec(ctx); err != nil {
			return err
		}
		for start := 0; start < len(deliveries); start += recipientBatch {
			part := deliveries[start:min(start+recipientBatch, len(deliveries))]
			if _, err := tx.NewInsert().Model(&part).Exec(ctx); err != nil {
				return fmt.Errorf("insert deliveries: %w", err)
			}
		}
		return nil
	})
	if sqldb.IsUniqueViolation(txErr) { // another attempt prepared it first
		return s.findRun(ctx, s.db, in.ScheduleID, in.ScheduledAt)
	}
	if txErr != nil {
		return nil, fmt.Errorf("prepare run: %w", txErr)
	}
	return run, nil
}

// plannedDeliveries lists the run's deliveries, numbered from 1: per user
// (ascending), mail then SMS. A user without an address for a channel gets
// a delivery that has already failed, so that the log says why.
func plannedDeliveries(run *NotificationRun, users []Recipient, now time.Time) []Delivery {
	var out []Delivery
	add := func(u *Recipient, channel, address string) {
		d := Delivery{
			RunID: run.ID, Seq: int64(len(out) + 1), NotificationID: run.NotificationID,
			Recipient: channel + ":" + models.FormatID(u.ID), ScheduledAt: run.ScheduledAt,
			UserID: u.ID, Kind: DeliveryMember, Channel: channel, Address: address, State: DeliveryPending, UpdatedAt: now,
		}
		if address == "" {
			d.State, d.LastError = DeliveryFailed, "the user has no "+map[string]string{ChannelMail: "mail address", ChannelSMS: "mobile number"}[channel]
		}
		out = append(out, d)
	}
	for i := range users {
		u := &users[i]
		if u.Status != identity.UserActive {
			continue
		}
		if run.Template.Mail != nil {
			add(u, ChannelMail, u.Email)
		}
		if run.Template.SMS != nil {
			add(u, ChannelSMS, u.MobileNumber)
		}
	}
	return out
}

func (s *NotificationStore) findRun(ctx context.Context, db bun.IDB, scheduleID int64, at time.Time) (*NotificationRun, error) {
	run := new(NotificationRun)
	err := db.NewSelect().Model(run).Where("notification_id = ? AND scheduled_at = ?", scheduleID, at.UTC()).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, models.NotFound("Run", "no such run")
	}
	if err != nil {
		return nil, fmt.Errorf("select run: %w", err)
	}
	return run, nil
}

// GetRun returns a run by id. ENOTFOUND when missing.
func (s *NotificationStore) GetRun(ctx context.Context, id int64) (*NotificationRun, error) {
	run := new(NotificationRun)
	err := s.db.NewSelect().Model(run).Where("id = ?", id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, models.NotFound("Run", "the run does not exist")
	}
	if err != nil {
		return nil, fmt.Errorf("select run: %w", err)
	}
	return run, nil
}

// FinishRun gives up on the run's member deliveries still pending (recording why),
// counts the outcomes and marks the run COMPLETED. Finishing twice changes
// nothing more.
func (s *NotificationStore) FinishRun(ctx context.Context, runID int64, reason string) (*NotificationRun, error) {
	var run *NotificationRun
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		var pending []Delivery
		if err := tx.NewSelect().Model(&pending).Where("run_id = ? AND kind = ? AND state = ?", runID, DeliveryMember, DeliveryPending).Scan(ctx); err != nil {
			return fmt.Errorf("select pending deliveries: %w", err)
		}
		now := time.Now().UTC()
		var log []DeliveryLogEntry
		for _, d := range pending {
			log = append(log, DeliveryLogEntry{ID: sqldb.NewID(), RunID: runID, Seq: d.Seq, Attempt: d.Attempts, Channel: d.Channel, Outcome: DeliveryFailed, Detail: reason, At: now})
		}
		if len(pending) > 0 {
			if _, err := tx.NewUpdate().Model((*Delivery)(nil)).Set("state = ?, last_error = ?, updated_at = ?", DeliveryFailed, reason, now).
				Where("run_id = ? AND kind = ? AND state = ?", runID, DeliveryMember, DeliveryPending).Exec(ctx); err != nil {
				return fmt.Errorf("give up deliveries: %w", err)
			}
			if err := insertLog(ctx, tx, log); err != nil {
				return err
			}
		}
		counts, err := deliveryCounts(ctx, tx, runID)
		if err != nil {
			return err
		}
		run = new(NotificationRun)
		if err = tx.NewSelect().Model(run).Where("id = ?", runID).Scan(ctx); err != nil {
			return fmt.Errorf("select run: %w", err)
		}
		run.Sent, run.Failed, run.Uncertain = counts[DeliverySent], counts[DeliveryFailed], counts[DeliveryUncertain]
		if run.Status == RunRunning {
			run.Status, run.FinishedAt = RunCompleted, &now
		}
		_, err = tx.NewUpdate().Model(run).Column("sent", "failed", "uncertain", "status", "finished_at").WherePK().Exec(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return run, nil
}

// deliveryCounts counts a run's member deliveries by state (the summary
// messages are not counted: they report the counts).
func deliveryCounts(ctx context.Context, db bun.IDB, runID int64) (map[string]int64, error) {
	var rows []struct {
		State string `bun:"state"`
		N     int64  `bun:"n"`
	}
	err := db.NewSelect().Model((*Delivery)(nil)).Column("state").ColumnExpr("count(*) AS n").
		Where("run_id = ? AND kind = ?", runID, DeliveryMember).Group("state").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.State] = r.N
	}
	return out, nil
}
