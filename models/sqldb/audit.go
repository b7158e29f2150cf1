package sqldb

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
)

// AuditEventRow is an audit event's row: the columns lists filter on and
// the event's canonical JSON (Body) with its SHA-256 (Hash, hex). Sequence
// numbers an organization's events without gaps, in an order no reader
// can see broken: a reader that sees number n sees every number before it.
//
// SQLite numbers them in the transaction that writes them (one writer at
// a time: it waits for no one). On PostgreSQL, where many writers commit
// at once and one organization's writers would otherwise pass its head one
// at a time, they are written without a number (seq and hash NULL, the
// body's sequence 0), and NumberAuditEvents numbers the committed ones
// later, one numbering at a time per organization. Every reader of numbers
// (lists, exports, hooks, digests) numbers first.
type AuditEventRow struct {
	bun.BaseModel `bun:"table:audit_events"`

	OrgID      int64     `bun:"org_id,pk"`
	Sequence   int64     `bun:"seq,pk"`
	ID         int64     `bun:"id"`
	Published  time.Time `bun:"published"`
	EventType  string    `bun:"event_type"`
	ActorType  string    `bun:"actor_type"`
	ActorID    string    `bun:"actor_id"`
	Result     string    `bun:"result"`
	RequestID  string    `bun:"request_id"`
	TargetType string    `bun:"target_type"`
	TargetID   string    `bun:"target_id"`
	JobID      *int64    `bun:"job_id"`
	Body       string    `bun:"body"`
	Hash       string    `bun:"hash"`
}

// Audit limits: what one event keeps of the client's text.
const (
	maxAuditUserAgent = 512
	maxAuditReason    = 1024
)

// writeEvents writes the events a transaction recorded, in it, one
// organization's at a time (organizations in id order, so that two SQLite
// transactions never wait for each other's heads the other way round).
// Each row is made first, its body encoded with the number left out; the
// dialect inserts them (on PostgreSQL unnumbered, in one statement).
func writeEvents(ctx context.Context, tx bun.Tx, events []models.AuditEvent) error {
	batches, err := eventBatches(ctx, events)
	if err != nil {
		return err
	}
	d := DialectOf(tx)
	for _, b := range batches {
		if err := d.insertAuditEvents(ctx, tx, b.org, b.events); err != nil {
			return err
		}
	}
	return nil
}

// orgEvents are one organization's events of a transaction, to be numbered.
type orgEvents struct {
	org    int64
	events []unnumbered
}

// eventBatches makes the rows of events, published now, grouped by
// organization in id order.
func eventBatches(ctx context.Context, events []models.AuditEvent) ([]orgEvents, error) {
	if len(events) == 0 {
		return nil, nil
	}
	origin := models.OriginOf(ctx)
	now := time.Now().UTC().Truncate(time.Microsecond)
	var batches []orgEvents
	for _, ev := range events {
		row, err := eventRow(ev, origin, now)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(batches, func(b orgEvents) bool { return b.org == ev.OrgID })
		if i < 0 {
			i = len(batches)
			batches = append(batches, orgEvents{org: ev.OrgID})
		}
		batches[i].events = append(batches[i].events, row)
	}
	slices.SortFunc(batches, func(a, b orgEvents) int { return cmp.Compare(a.org, b.org) })
	return batches, nil
}

// unnumbered is an event's row before its number is known: Sequence, Body
// and Hash unset, the body's JSON in two parts, before and after the
// number.
type unnumbered struct {
	row                AuditEventRow
	bodyHead, bodyTail string
}

// unnumberedBody is the body as PostgreSQL writes it before its number
// is known: sequence 0.
func (u *unnumbered) unnumberedBody() string { return u.bodyHead + "0" + u.bodyTail }

// numbered is the row numbered seq, with its body and hash.
func (u *unnumbered) numbered(seq int64) AuditEventRow {
	r := u.row
	r.Sequence = seq
	r.Body = u.bodyHead + strconv.FormatInt(seq, 10) + u.bodyTail
	r.Hash = EventHash(r.Body)
	return r
}

// NumberAuditEvents numbers the organization's committed events that have
// none yet and returns its last number (0: no events). Whatever reads
// events by number calls it first, so that it reads every event committed
// before the call.
func NumberAuditEvents(ctx context.Context, db bun.IDB, org int64) (int64, error) {
	last, err := DialectOf(db).numberAuditEvents(ctx, db, org)
	if err != nil {
		return 0, models.Unavailable(err)
	}
	return last, nil
}

// NumberPendingAuditEvents numbers the committed events of every
// organization that has events without a number yet, and returns how many
// organizations it numbered (always 0 on SQLite, which numbers events as it
// writes them).
func NumberPendingAuditEvents(ctx context.Context, db bun.IDB) (int, error) {
	orgs, err := PendingAuditOrgs(ctx, db)
	if err != nil {
		return 0, err
	}
	for _, org := range orgs {
		if _, err := NumberAuditEvents(ctx, db, org); err != nil {
			return 0, err
		}
	}
	return len(orgs), nil
}

// PendingAuditOrgs returns the organizations that have committed events
// without a number yet, in id order.
func PendingAuditOrgs(ctx context.Context, db bun.IDB) ([]int64, error) {
	orgs, err := DialectOf(db).pendingAuditOrgs(ctx, db)
	return orgs, models.Unavailable(err)
}

// auditHead returns the organization's last event number (0: none), as
// numbered so far: NumberAuditEvents is the one to call first.
func auditHead(ctx context.Context, db bun.IDB, org int64) (int64, error) {
	var last int64
	err := db.NewSelect().Table("audit_heads").Column("last_seq").Where("org_id = ?", org).Scan(ctx, &last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read the audit head: %w", err)
	}
	return last, nil
}

// takeSequences takes the next n numbers of org's events (locking its
// audit_heads row until the transaction ends) and returns the last.
func takeSequences(ctx context.Context, tx bun.Tx, org int64, n int) (int64, error) {
	var last int64
	err := tx.NewRaw(`INSERT INTO audit_heads (org_id, last_seq) VALUES (?, ?)
		ON CONFLICT (org_id) DO UPDATE SET last_seq = audit_heads.last_seq + excluded.last_seq
		RETURNING last_seq`, org, n).Scan(ctx, &last)
	if err != nil {
		return 0, fmt.Errorf("number audit events: %w", err)
	}
	return last, nil
}

// sequenceKey is where an event's number sits in its encoded body, which
// begins with its id and organization id (digit strings).
const sequenceKey = `,"sequence":`

// eventRow makes the row of ev, published at now, to be numbered.
func eventRow(ev models.AuditEvent, o models.Origin, now time.Time) (unnumbered, error) {
	id := NewID()
	result := ev.Result
	if result == "" {
		result = models.ResultSuccess
	}
	targets := ev.Targets
	if targets == nil {
		targets = []models.EventTarget{}
	}
	rec := models.EventRecord{
		ID: models.FormatID(id), OrgID: models.FormatID(ev.OrgID),
		Published: now.Format(time.RFC3339Nano), EventType: ev.Type, Actor: o.Actor,
		Client:    models.EventClient{IPAddress: o.IPAddress, UserAgent: truncated(o.UserAgent, maxAuditUserAgent)},
		RequestID: o.RequestID, Outcome: models.EventOutcome{Result: result, Reason: truncated(ev.Reason, maxAuditReason)},
		Targets: targets,
	}
	row := AuditEventRow{OrgID: ev.OrgID, ID: id, Published: now, EventType: ev.Type,
		ActorType: o.Actor.Type, ActorID: o.Actor.ID, Result: result, RequestID: o.RequestID}
	if o.JobID != 0 {
		job := models.FormatID(o.JobID)
		rec.JobID, row.JobID = &job, &o.JobID
	}
	if len(targets) > 0 {
		row.TargetType, row.TargetID = targets[0].Type, targets[0].ID
	}
	body, err := json.Marshal(rec) // Sequence 0: its place is cut out below
	if err != nil {
		return unnumbered{}, fmt.Errorf("encode audit event %s: %w", ev.Type, err)
	}
	// The first occurrence is the key's: only digit strings come before it.
	i := bytes.Index(body, []byte(sequenceKey+"0,"))
	if i < 0 {
		return unnumbered{}, fmt.Errorf("encode audit event %s: no sequence in %.80s", ev.Type, body)
	}
	head := i + len(sequenceKey)
	return unnumbered{row: row, bodyHead: string(body[:head]), bodyTail: string(body[head+1:])}, nil
}

// EventHash is the SHA-256 of an event's canonical JSON, in hex: what the
// row keeps and the digests seal.
func EventHash(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

func truncated(s string, n int) string {
	t, _ := models.Truncate(s, n)
	return t
}
