package notification

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models/sqldb"
	"slices"
	"time"

	"github.com/uptrace/bun"
)

// Delivery is one message of a run to one recipient on one channel. Its key
// (notification, recipient, scheduled time) is unique: a retried step finds
// the delivery it made before and never sends it twice.
//
// States: pending (to send) → sending (claimed by one attempt of a send
// step, Claim naming it) → sent, failed (refused for good, or out of
// attempts), back to pending (a temporary failure: nothing was delivered),
// or uncertain (the message may have been delivered; never sent again).
// A delivery found sending by another attempt is uncertain too: the attempt
// that claimed it died between claiming and recording, and whether the
// server accepted the message in that window is unknown.
type Delivery struct {
	bun.BaseModel `bun:"table:notification_deliveries"`

	RunID          int64     `bun:"run_id,pk"`
	Seq            int64     `bun:"seq,pk"`
	NotificationID int64     `bun:"notification_id"`
	Recipient      string    `bun:"recipient"` // <channel>:<user id>
	ScheduledAt    time.Time `bun:"scheduled_at"`
	UserID         int64     `bun:"user_id"` // 0 for a summary
	Kind           string    `bun:"kind"`    // DeliveryMember or DeliverySummary
	Channel        string    `bun:"channel"`
	Address        string    `bun:"address"`
	State          string    `bun:"state"`
	Claim          int64     `bun:"claim"`
	Attempts       int       `bun:"attempts"`
	LastError      string    `bun:"last_error"`
	UpdatedAt      time.Time `bun:"updated_at"`
}

// Delivery states, also the outcomes of the delivery log (with
// DeliveryTemporary).
const (
	DeliveryPending   = "pending"
	DeliverySending   = "sending"
	DeliverySent      = "sent"
	DeliveryFailed    = "failed"
	DeliveryUncertain = "uncertain"
	// DeliveryTemporary is the log outcome of a temporary failure.
	DeliveryTemporary = "temporary"
)

// Kinds of delivery: a member's own message, or the summary of the run to
// an address of the template's mail.to/cc or sms.to.
const (
	DeliveryMember  = "member"
	DeliverySummary = "summary"
)

// Channels.
const (
	ChannelMail = "mail"
	ChannelSMS  = "sms"
)

// MaxDeliveryAttempts bounds the tries of one delivery; a temporary failure
// on the last one fails it.
const MaxDeliveryAttempts = 5

// DeliveryLogEntry is one attempt of a delivery and its outcome.
type DeliveryLogEntry struct {
	bun.BaseModel `bun:"table:notification_delivery_log"`

	ID      int64     `bun:"id,pk"`
	RunID   int64     `bun:"run_id"`
	Seq     int64     `bun:"seq"`
	Attempt int       `bun:"attempt"`
	Channel string    `bun:"channel"`
	Outcome string    `bun:"outcome"`
	Detail  string    `bun:"detail"`
	At      time.Time `bun:"at"`
}

// DeliveryOutcome is what one attempt of a claimed delivery came to:
// DeliverySent, DeliveryFailed, DeliveryUncertain or DeliveryTemporary.
type DeliveryOutcome struct {
	Delivery *Delivery
	Outcome  string
	Detail   string
}

// OpenDeliveries returns the deliveries of a run with seq in [from, to) that
// are not final (pending or sending), in seq order.
func (s *NotificationStore) OpenDeliveries(ctx context.Context, runID, from, to int64) ([]Delivery, error) {
	var out []Delivery
	err := s.db.NewSelect().Model(&out).
		Where("run_id = ? AND seq >= ? AND seq < ? AND state IN (?)", runID, from, to, bun.List([]string{DeliveryPending, DeliverySending})).
		OrderExpr("seq").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select open deliveries: %w", err)
	}
	return out, nil
}

// AbandonClaims marks uncertain the deliveries among seqs still sending
// under a claim other than claim (an attempt that died), logging each.
func (s *NotificationStore) AbandonClaims(ctx context.Context, runID, claim int64, stale []Delivery) error {
	if len(stale) == 0 {
		return nil
	}
	const why = "a send attempt ended between claiming and recording this delivery; it may have been delivered, so it is not sent again"
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		now := time.Now().UTC()
		var log []DeliveryLogEntry
		for _, d := range stale {
			res, err := tx.NewUpdate().Model((*Delivery)(nil)).Set("state = ?, last_error = ?, updated_at = ?", DeliveryUncertain, why, now).
				Where("run_id = ? AND seq = ? AND state = ? AND claim = ? AND claim <> ?", runID, d.Seq, DeliverySending, d.Claim, claim).Exec(ctx)
			if err != nil {
				return fmt.Errorf("abandon delivery: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				log = append(log, DeliveryLogEntry{ID: sqldb.NewID(), RunID: runID, Seq: d.Seq, Attempt: d.Attempts, Channel: d.Channel, Outcome: DeliveryUncertain, Detail: why, At: now})
			}
		}
		return insertLog(ctx, tx, log)
	})
}

// Step records the outcomes of deliveries held by claim and claims the
// pending deliveries among next for it, in one transaction. It returns the
// deliveries claimed (those of next still pending), with their attempt
// counted. Only deliveries still held by claim change: one another attempt
// took over stays as that attempt left it.
func (s *NotificationStore) Step(ctx context.Context, runID, claim int64, outcomes []DeliveryOutcome, next []int64) ([]Delivery, error) {
	var claimed []Delivery
	// SQLite has one writer: queue here rather than in its busy handler,
	// which sleeps for milliseconds between tries.
	defer sqldb.DialectOf(s.db).QueueWrites(&s.writes)()
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		now := time.Now().UTC()
		if err := recordOutcomes(ctx, tx, runID, claim, outcomes, now); err != nil {
			return err
		}
		if len(next) == 0 {
			return nil
		}
		err := tx.NewUpdate().Model((*Delivery)(nil)).
			Set("state = ?, claim = ?, attempts = attempts + 1, updated_at = ?", DeliverySending, claim, now).
			Where("run_id = ? AND seq IN (?) AND state = ?", runID, bun.List(next), DeliveryPending).
			Returning("*").Scan(ctx, &claimed)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("claim deliveries: %w", err)
		}
		slices.SortFunc(claimed, func(a, b Delivery) int { return cmp.Compare(a.Seq, b.Seq) })
		return nil
	})
	return claimed, err
}

// recordOutcomes writes outcomes (grouped so that identical ones share one
// statement) and logs each.
func recordOutcomes(ctx context.Context, tx bun.Tx, runID, claim int64, outcomes []DeliveryOutcome, now time.Time) error {
	if len(outcomes) == 0 {
		return nil
	}
	type key struct{ outcome, detail string }
	groups := map[key][]int64{}
	log := make([]DeliveryLogEntry, 0, len(outcomes))
	for _, o := range outcomes {
		k := key{o.Outcome, o.Detail}
		groups[k] = append(groups[k], o.Delivery.Seq)
		log = append(log, DeliveryLogEntry{ID: sqldb.NewID(), RunID: runID, Seq: o.Delivery.Seq, Attempt: o.Delivery.Attempts,
			Channel: o.Delivery.Channel, Outcome: o.Outcome, Detail: o.Detail, At: now})
	}
	for k, seqs := range groups {
		q := tx.NewUpdate().Model((*Delivery)(nil))
		switch k.outcome {
		case DeliveryTemporary:
			q = q.Set("state = CASE WHEN attempts >= ? THEN ? ELSE ? END", MaxDeliveryAttempts, DeliveryFailed, DeliveryPending)
		case DeliverySent, DeliveryFailed, DeliveryUncertain:
			q = q.Set("state = ?", k.outcome)
		default:
			return fmt.Errorf("record deliveries: unknown outcome %q", k.outcome)
		}
		_, err := q.Set("last_error = ?, updated_at = ?", k.detail, now).
			Where("run_id = ? AND seq IN (?) AND state = ? AND claim = ?", runID, bun.List(seqs), DeliverySending, claim).Exec(ctx)
		if err != nil {
			return fmt.Errorf("record deliveries: %w", err)
		}
	}
	return insertLog(ctx, tx, log)
}

func insertLog(ctx context.Context, tx bun.Tx, log []DeliveryLogEntry) error {
	if len(log) == 0 {
		return nil
	}
	if _, err := tx.NewInsert().Model(&log).Exec(ctx); err != nil {
		return fmt.Errorf("insert delivery log: %w", err)
	}
	return nil
}

// DeliveryLog returns the log of a run in the order it was written, up to
// limit entries (all when limit is 0).
func (s *NotificationStore) DeliveryLog(ctx context.Context, runID int64, limit int) ([]DeliveryLogEntry, error) {
	var out []DeliveryLogEntry
	q := s.db.NewSelect().Model(&out).Where("run_id = ?", runID).OrderExpr("seq, at, id")
	if limit > 0 {
		q = q.Limit(int64(limit))
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("select delivery log: %w", err)
	}
	return out, nil
}

// Deliveries returns a run's deliveries in seq order.
func (s *NotificationStore) Deliveries(ctx context.Context, runID int64) ([]Delivery, error) {
	var out []Delivery
	if err := s.db.NewSelect().Model(&out).Where("run_id = ?", runID).OrderExpr("seq").Scan(ctx); err != nil {
		return nil, fmt.Errorf("select deliveries: %w", err)
	}
	return out, nil
}
