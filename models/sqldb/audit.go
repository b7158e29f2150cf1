package sqldb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
)

// AuditEventRow is an audit event's row: the columns lists filter on and
// the event's canonical JSON (Body) with its SHA-256 (Hash, hex). Sequence
// numbers an organization's events in commit order without gaps: the
// transaction that writes events takes the next numbers from the
// organization's audit_heads row and holds that row locked until it
// commits, so no reader ever sees a later number before an earlier one.
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

// writeEvents writes the events a transaction recorded, in it, numbering
// each organization's in turn (organizations in id order, so that two
// transactions never wait for each other's heads the other way round).
func writeEvents(ctx context.Context, tx bun.Tx, events []models.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	origin := models.OriginOf(ctx)
	now := time.Now().UTC().Truncate(time.Microsecond)
	byOrg := map[int64][]models.AuditEvent{}
	var orgs []int64
	for _, ev := range events {
		if _, seen := byOrg[ev.OrgID]; !seen {
			orgs = append(orgs, ev.OrgID)
		}
		byOrg[ev.OrgID] = append(byOrg[ev.OrgID], ev)
	}
	slices.Sort(orgs)
	rows := make([]AuditEventRow, 0, len(events))
	for _, org := range orgs {
		evs := byOrg[org]
		var last int64
		err := tx.NewRaw(`INSERT INTO audit_heads (org_id, last_seq) VALUES (?, ?)
			ON CONFLICT (org_id) DO UPDATE SET last_seq = audit_heads.last_seq + excluded.last_seq
			RETURNING last_seq`, org, len(evs)).Scan(ctx, &last)
		if err != nil {
			return fmt.Errorf("number audit events: %w", err)
		}
		for i, ev := range evs {
			row, err := eventRow(ev, origin, last-int64(len(evs))+1+int64(i), now)
			if err != nil {
				return err
			}
			rows = append(rows, row)
		}
	}
	if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
		return fmt.Errorf("insert audit events: %w", err)
	}
	return nil
}

// eventRow makes the row of ev, numbered seq, published at now.
func eventRow(ev models.AuditEvent, o models.Origin, seq int64, now time.Time) (AuditEventRow, error) {
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
		ID: models.FormatID(id), OrgID: models.FormatID(ev.OrgID), Sequence: seq,
		Published: now.Format(time.RFC3339Nano), EventType: ev.Type, Actor: o.Actor,
		Client:    models.EventClient{IPAddress: o.IPAddress, UserAgent: truncated(o.UserAgent, maxAuditUserAgent)},
		RequestID: o.RequestID, Outcome: models.EventOutcome{Result: result, Reason: truncated(ev.Reason, maxAuditReason)},
		Targets: targets,
	}
	row := AuditEventRow{OrgID: ev.OrgID, Sequence: seq, ID: id, Published: now, EventType: ev.Type,
		ActorType: o.Actor.Type, ActorID: o.Actor.ID, Result: result, RequestID: o.RequestID}
	if o.JobID != 0 {
		job := models.FormatID(o.JobID)
		rec.JobID, row.JobID = &job, &o.JobID
	}
	if len(targets) > 0 {
		row.TargetType, row.TargetID = targets[0].Type, targets[0].ID
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return AuditEventRow{}, fmt.Errorf("encode audit event %s: %w", ev.Type, err)
	}
	row.Body = string(body)
	row.Hash = EventHash(row.Body)
	return row, nil
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
