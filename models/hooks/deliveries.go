package hooks

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/listing"
	"iam/models/sqldb"
)

// Delivery statuses.
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// DefaultSchedule is the wait before each retry of a failed delivery: the
// first attempt goes at once, then after 5 s, 5 min, 30 min, 2 h, 5 h,
// 10 h and 10 h (eight attempts over about 28 hours).
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// DefaultDisableAfter is how long a hook fails without a success before it
// is disabled.
const DefaultDisableAfter = 5 * 24 * time.Hour

// Delivery is one event for one hook: its webhook-id is its id, the same at
// every attempt.
type Delivery struct {
	bun.BaseModel `bun:"table:event_hook_deliveries,alias:delivery"`

	ID           int64     `bun:"id,pk"`
	OrgID        int64     `bun:"org_id"`
	HookID       int64     `bun:"hook_id"`
	EventID      int64     `bun:"event_id"`
	EventSeq     int64     `bun:"event_seq"`
	EventType    string    `bun:"event_type"`
	Payload      string    `bun:"payload"`
	Status       string    `bun:"status"`
	AttemptCount int       `bun:"attempt_count"`
	ScheduleFrom int       `bun:"schedule_from"`
	Attempts     []Attempt `bun:"attempts,type:json"`
	// NextAttemptAt is when the next attempt is due; nil once it
	// succeeded or failed for good.
	NextAttemptAt *time.Time `bun:"next_attempt_at"`
	CreatedAt     time.Time  `bun:"created_at"`
	UpdatedAt     time.Time  `bun:"updated_at"`
}

// Attempt is one try at a delivery.
type Attempt struct {
	Time       time.Time `json:"time"`
	StatusCode int       `json:"status_code"`
	LatencyMS  int64     `json:"latency_ms"`
	Error      string    `json:"error,omitempty"`
}

// WebhookID is the delivery's webhook-id header.
func (d *Delivery) WebhookID() string { return "msg_" + models.FormatID(d.ID) }

// ErrDeliveryNotFound answers a delivery not of the hook.
var ErrDeliveryNotFound = models.NotFound("Delivery", "the delivery does not exist")

// DeliveryListing is the allow-list of GET /event-hooks/{id}/deliveries:
// offset paging, newest first by default.
var DeliveryListing = listing.MustSchema(listing.Schema{
	Name:   "event_hook_deliveries",
	Paging: listing.OffsetPaging,
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "status", Column: "status", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "event_type", Column: "event_type", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "attempt_count", Column: "attempt_count", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "created_time", Column: "created_at", Type: listing.TypeTime, Filter: true, Sort: true},
		{Name: "next_attempt_time", Column: "next_attempt_at", Type: listing.TypeTime, Filter: true, Sort: true},
	},
	DefaultSort: "-created_time",
})

// payload is the Standard Webhooks body: {type, timestamp, data}, data the
// audit event as GET /audit-events shows it.
type payload struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

type eventRow struct {
	Seq       int64     `bun:"seq"`
	ID        int64     `bun:"id"`
	Published time.Time `bun:"published"`
	EventType string    `bun:"event_type"`
	Body      string    `bun:"body"`
}

// Dispatch turns the organization's audit events committed after the
// hook's cursor (at most limit of them, in sequence order) into the hook's
// deliveries, due now, and advances the cursor past them in the same
// transaction. It returns how many events it read (0: none new, or the
// hook is disabled or gone). Run by one dispatcher per hook at a time.
func (s *HookStore) Dispatch(ctx context.Context, h *Hook, limit int) (int, error) {
	head, err := sqldb.NumberAuditEvents(ctx, s.db, h.OrgID)
	if err != nil || head <= h.CursorSeq {
		return 0, err
	}
	read := 0
	err = sqldb.InTxOnce(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		cur, gerr := getHook(ctx, tx, 0, h.ID, true)
		if errors.Is(gerr, ErrHookNotFound) {
			return nil
		}
		if gerr != nil {
			return gerr
		}
		*h = *cur
		if !cur.Enabled {
			return nil
		}
		var evs []eventRow
		if err = tx.NewSelect().Table("audit_events").Column("seq", "id", "published", "event_type", "body").
			Where("org_id = ? AND seq > ?", h.OrgID, h.CursorSeq).Order("seq").Limit(int64(limit)).Scan(ctx, &evs); err != nil {
			return fmt.Errorf("read audit events: %w", err)
		}
		if len(evs) == 0 {
			return nil
		}
		now := time.Now().UTC()
		var ds []Delivery
		for _, ev := range evs {
			if !Matches(h.EventTypes, ev.EventType) {
				continue
			}
			body, merr := json.Marshal(payload{Type: ev.EventType, Timestamp: ev.Published.UTC().Format(time.RFC3339Nano), Data: json.RawMessage(ev.Body)})
			if merr != nil {
				return fmt.Errorf("encode delivery: %w", merr)
			}
			ds = append(ds, Delivery{ID: sqldb.NewID(), OrgID: h.OrgID, HookID: h.ID, EventID: ev.ID, EventSeq: ev.Seq,
				EventType: ev.EventType, Payload: string(body), Status: StatusPending, Attempts: []Attempt{},
				NextAttemptAt: &now, CreatedAt: ev.Published.UTC(), UpdatedAt: now})
		}
		if len(ds) > 0 {
			if _, err = tx.NewInsert().Model(&ds).Exec(ctx); err != nil {
				return fmt.Errorf("insert deliveries: %w", err)
			}
		}
		h.CursorSeq = evs[len(evs)-1].Seq
		if _, err = tx.NewUpdate().Model(h).Column("cursor_seq").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("advance event hook cursor: %w", err)
		}
		read = len(evs)
		return nil
	})
	return read, err
}

// Due returns the hook's pending deliveries due at now, at most limit, in
// the order they fell due and, among those due together, in event order.
func (s *HookStore) Due(ctx context.Context, hookID int64, now time.Time, limit int) ([]Delivery, error) {
	var out []Delivery
	err := s.db.NewSelect().Model(&out).Where("hook_id = ? AND status = ? AND next_attempt_at <= ?", hookID, StatusPending, now.UTC()).
		Order("next_attempt_at", "event_seq", "id").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("due deliveries: %w", err)
	}
	return out, nil
}

// NextDue returns when the hook's next pending delivery falls due (nil:
// none pending).
func (s *HookStore) NextDue(ctx context.Context, hookID int64) (*time.Time, error) {
	var t []time.Time
	err := s.db.NewSelect().Model((*Delivery)(nil)).Column("next_attempt_at").
		Where("hook_id = ? AND status = ?", hookID, StatusPending).Order("next_attempt_at").Limit(1).Scan(ctx, &t)
	if err != nil {
		return nil, fmt.Errorf("next due delivery: %w", err)
	}
	if len(t) == 0 {
		return nil, nil
	}
	return &t[0], nil
}

// Outcome is one attempt's result for Record.
type Outcome struct {
	DeliveryID int64
	Attempt    Attempt
	OK         bool
}

// Policy is the retry schedule and when a failing hook is disabled.
type Policy struct {
	Schedule     []time.Duration
	DisableAfter time.Duration
}

// DefaultPolicy is the schedule of docs/event-hooks.md.
var DefaultPolicy = Policy{Schedule: DefaultSchedule, DisableAfter: DefaultDisableAfter}

// Recorded is what Record did: how many deliveries succeeded, will be
// retried or failed for good, and whether it disabled the hook.
type Recorded struct {
	Succeeded, Retrying, Failed int
	Disabled                    bool
}

// Record writes attempts at the hook's deliveries, in one transaction:
// each attempt appended, the delivery succeeded, due again after the
// policy's next wait, or failed once the schedule is spent. A hook whose
// deliveries have failed without a success for DisableAfter is disabled,
// with its event event_hook.disabled.
func (s *HookStore) Record(ctx context.Context, h *Hook, outs []Outcome, pol Policy) (Recorded, error) {
	var res Recorded
	if len(outs) == 0 {
		return res, nil
	}
	ids := make([]int64, len(outs))
	for i, o := range outs {
		ids[i] = o.DeliveryID
	}
	ctx = models.WithOrigin(ctx, models.Origin{Actor: models.SystemActor})
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		res = Recorded{}
		hk, err := getHook(ctx, tx, 0, h.ID, true)
		if errors.Is(err, ErrHookNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var ds []Delivery
		if err = tx.NewSelect().Model(&ds).Where("id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
			return fmt.Errorf("read deliveries: %w", err)
		}
		byID := make(map[int64]*Delivery, len(ds))
		for i := range ds {
			byID[ds[i].ID] = &ds[i]
		}
		now := time.Now().UTC()
		anyOK, lastFail := false, time.Time{}
		for _, o := range outs {
			d := byID[o.DeliveryID]
			if d == nil || d.Status != StatusPending {
				continue
			}
			d.Attempts = append(d.Attempts, o.Attempt)
			d.AttemptCount++
			d.UpdatedAt = now
			switch {
			case o.OK:
				d.Status, d.NextAttemptAt = StatusSucceeded, nil
				res.Succeeded++
				anyOK = true
			case d.AttemptCount-d.ScheduleFrom-1 < len(pol.Schedule):
				next := o.Attempt.Time.Add(pol.Schedule[d.AttemptCount-d.ScheduleFrom-1]).UTC()
				d.NextAttemptAt = &next
				res.Retrying++
				lastFail = o.Attempt.Time
			default:
				d.Status, d.NextAttemptAt = StatusFailed, nil
				res.Failed++
				lastFail = o.Attempt.Time
			}
			if _, err = tx.NewUpdate().Model(d).Column("status", "attempt_count", "attempts", "next_attempt_at", "updated_at").
				WherePK().Exec(ctx); err != nil {
				return fmt.Errorf("record delivery attempt: %w", err)
			}
		}
		switch {
		case anyOK && hk.FailingSince != nil:
			hk.FailingSince = nil
		case !anyOK && !lastFail.IsZero() && hk.FailingSince == nil:
			t := lastFail.UTC()
			hk.FailingSince = &t
		}
		if hk.Enabled && hk.FailingSince != nil && pol.DisableAfter > 0 && now.Sub(*hk.FailingSince) >= pol.DisableAfter {
			hk.Enabled = false
			hk.DisabledReason = fmt.Sprintf("deliveries failed without a success since %s", hk.FailingSince.Format(time.RFC3339))
			hk.UpdatedAt = now
			res.Disabled = true
			t := hookTarget(hk)
			t.Changes = []models.FieldChange{{Field: "enabled", Old: true, New: false}}
			if err = models.Record(ctx, models.AuditEvent{OrgID: hk.OrgID, Type: audit.EventHookDisabled,
				Targets: []models.EventTarget{t}, Reason: hk.DisabledReason}); err != nil {
				return err
			}
		}
		if _, err = tx.NewUpdate().Model(hk).Column("failing_since", "enabled", "disabled_reason", "updated_at").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("update event hook: %w", err)
		}
		*h = *hk
		return nil
	})
	return res, err
}

// ListDeliveries lists a hook's deliveries. ENOTFOUND for a hook not of the
// organization.
func (s *HookStore) ListDeliveries(ctx context.Context, orgID, hookID int64, p listing.Params) ([]Delivery, listing.Meta, error) {
	if _, err := s.Get(ctx, orgID, hookID); err != nil {
		return nil, nil, err
	}
	out := []Delivery{}
	q := s.db.NewSelect().Model(&out).Where("org_id = ? AND hook_id = ?", orgID, hookID)
	meta, err := listing.Fetch(ctx, q, &out, DeliveryListing, p)
	if err != nil {
		return nil, meta, models.Unavailable(fmt.Errorf("list deliveries: %w", err))
	}
	return out, meta, nil
}

// GetDelivery returns one delivery of a hook. ENOTFOUND.
func (s *HookStore) GetDelivery(ctx context.Context, orgID, hookID, id int64) (*Delivery, error) {
	d := new(Delivery)
	err := s.db.NewSelect().Model(d).Where("id = ? AND hook_id = ? AND org_id = ?", id, hookID, orgID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrDeliveryNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get delivery: %w", err)
	}
	return d, nil
}

// RetryDelivery makes a delivery due now again, with the whole retry
// schedule ahead of it: a succeeded one is sent once more (same
// webhook-id), a failed or pending one at once. ENOTFOUND.
func (s *HookStore) RetryDelivery(ctx context.Context, orgID, hookID, id int64) (*Delivery, error) {
	var out *Delivery
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		h, err := getHook(ctx, tx, orgID, hookID, true)
		if err != nil {
			return err
		}
		d := new(Delivery)
		err = tx.NewSelect().Model(d).Where("id = ? AND hook_id = ? AND org_id = ?", id, hookID, orgID).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrDeliveryNotFound
		}
		if err != nil {
			return fmt.Errorf("get delivery: %w", err)
		}
		now := time.Now().UTC()
		d.Status, d.NextAttemptAt, d.ScheduleFrom, d.UpdatedAt = StatusPending, &now, d.AttemptCount, now
		if _, err = tx.NewUpdate().Model(d).Column("status", "next_attempt_at", "schedule_from", "updated_at").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("retry delivery: %w", err)
		}
		out = d
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.EventHookDeliveryRetried,
			Targets: []models.EventTarget{hookTarget(h), audit.Target("event_hook_delivery", d.ID, d.EventType)}})
	})
	return out, err
}

// Test queues a hook.test delivery to the hook, due now. ENOTFOUND.
func (s *HookStore) Test(ctx context.Context, orgID, hookID int64) (*Delivery, error) {
	var out *Delivery
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		h, err := getHook(ctx, tx, orgID, hookID, true)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		id := sqldb.NewID()
		data, err := json.Marshal(map[string]string{"hook_id": models.FormatID(h.ID), "org_id": models.FormatID(orgID),
			"message": "a test event sent on request"})
		if err != nil {
			return err
		}
		body, err := json.Marshal(payload{Type: TestEventType, Timestamp: now.Format(time.RFC3339Nano), Data: data})
		if err != nil {
			return err
		}
		d := &Delivery{ID: id, OrgID: orgID, HookID: hookID, EventType: TestEventType, Payload: string(body),
			Status: StatusPending, Attempts: []Attempt{}, NextAttemptAt: &now, CreatedAt: now, UpdatedAt: now}
		if _, err = tx.NewInsert().Model(d).Exec(ctx); err != nil {
			return fmt.Errorf("insert test delivery: %w", err)
		}
		out = d
		return record(ctx, orgID, audit.EventHookTestRequested, hookTarget(h))
	})
	return out, err
}

// Backlog counts the hook's pending deliveries.
func (s *HookStore) Backlog(ctx context.Context, hookID int64) (int64, error) {
	return s.db.NewSelect().Model((*Delivery)(nil)).Where("hook_id = ? AND status = ?", hookID, StatusPending).Count(ctx)
}

// DeliveryRetention is how long a hook's finished deliveries (succeeded or
// failed) are kept; pending ones are kept until they finish.
const DeliveryRetention = 30 * 24 * time.Hour

// PruneDeliveries deletes at most limit of the hook's deliveries that
// finished before before, oldest first, returning how many.
func (s *HookStore) PruneDeliveries(ctx context.Context, hookID int64, before time.Time, limit int) (int64, error) {
	sub := s.db.NewSelect().Model((*Delivery)(nil)).Column("id").
		Where("hook_id = ? AND status IN (?) AND updated_at < ?", hookID, bun.List([]string{StatusSucceeded, StatusFailed}), before.UTC()).
		Order("updated_at").Limit(int64(limit))
	res, err := s.db.NewDelete().Model((*Delivery)(nil)).Where("id IN (?)", sub).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return res.RowsAffected()
}
