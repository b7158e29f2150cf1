package audit

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/listing"
	"iam/models/sqldb"
)

// EventListing is the allow-list of GET /audit-events: filter only (the
// order is the organization's commit order, sequence), cursor paging.
var EventListing = listing.MustSchema(listing.Schema{
	Name: "audit_events",
	Key:  "seq",
	Attributes: []listing.Attribute{
		{Name: "event_type", Column: "event_type", Type: listing.TypeString, Filter: true},
		{Name: "actor.id", Column: "actor_id", Type: listing.TypeString, Filter: true},
		{Name: "actor.type", Column: "actor_type", Type: listing.TypeString, Filter: true},
		{Name: "target.id", Column: "target_id", Type: listing.TypeString, Filter: true},
		{Name: "target.type", Column: "target_type", Type: listing.TypeString, Filter: true},
		{Name: "outcome.result", Column: "result", Type: listing.TypeString, Filter: true},
		{Name: "published", Column: "published", Type: listing.TypeTime, Filter: true},
		{Name: "request_id", Column: "request_id", Type: listing.TypeString, Filter: true},
		{Name: "job_id", Column: "job_id", Type: listing.TypeID, Filter: true},
	},
	DefaultLimit: 100,
	MaxLimit:     1000,
	Paging:       listing.CursorPaging,
})

// Query is what a list or an export of events selects.
type Query struct {
	Filter listing.Expr // nil: every event
	// Since and Until bound published (Since inclusive, Until exclusive);
	// zero: unbounded.
	Since, Until time.Time
	// Descending lists the newest first; ascending (the default) is the
	// order to tail in.
	Descending bool
	Limit      int    // page size; 0: EventListing's default
	Cursor     string // the next_cursor of the previous page
}

// Meta is the paging of an audit page. In ascending order every page,
// the last one too, has a next_cursor: following it returns the events
// committed since, each exactly once.
type Meta struct {
	Limit      int     `json:"limit"`
	Cursor     *string `json:"cursor"`
	NextCursor *string `json:"next_cursor"`
	IsLast     bool    `json:"is_last"`
}

// EventStore reads an organization's audit events.
type EventStore struct{ db *bun.DB }

// NewEventStore returns the EventStore over db.
func NewEventStore(db *bun.DB) *EventStore { return &EventStore{db: db} }

// ErrEventNotFound is the error of an event id that is not the
// organization's.
var ErrEventNotFound = models.NotFound("Audit Event", "the audit event does not exist")

// List returns a page of the organization's events in q's order.
// EINVALID (a *listing.ParamError) for a cursor of another query.
func (s *EventStore) List(ctx context.Context, orgID int64, q Query) ([]json.RawMessage, *Meta, error) {
	hash := q.hash()
	after, err := readCursor(q.Cursor, hash)
	if err != nil {
		return nil, nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = EventListing.DefaultLimit
	}
	limit = min(limit, EventListing.MaxLimit)
	if _, err = sqldb.NumberAuditEvents(ctx, s.db, orgID); err != nil {
		return nil, nil, err
	}
	sel, err := s.selectEvents(orgID, q)
	if err != nil {
		return nil, nil, err
	}
	if q.Cursor != "" {
		if q.Descending {
			sel = sel.Where("seq < ?", after)
		} else {
			sel = sel.Where("seq > ?", after)
		}
	}
	var rows []sqldb.AuditEventRow
	if err := sel.Column("seq", "body").Limit(int64(limit)+1).Scan(ctx, &rows); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, nil, models.Unavailable(fmt.Errorf("list audit events: %w", err))
	}
	meta := &Meta{Limit: limit, IsLast: len(rows) <= limit}
	if q.Cursor != "" {
		meta.Cursor = &q.Cursor
	}
	rows = rows[:min(len(rows), limit)]
	out := make([]json.RawMessage, len(rows))
	for i, r := range rows {
		out[i] = json.RawMessage(r.Body)
	}
	last := after
	if len(rows) > 0 {
		last = rows[len(rows)-1].Sequence
	}
	// Ascending, the last page too points past what it showed: the cursor
	// a tail keeps following. Descending ends.
	if !meta.IsLast || !q.Descending {
		next := writeCursor(last, hash)
		meta.NextCursor = &next
	}
	return out, meta, nil
}

// Each calls fn with every event q selects that committed before the call,
// in its order, reading a batch at a time (constant memory, whatever the
// count). Limit and Cursor are ignored.
func (s *EventStore) Each(ctx context.Context, orgID int64, q Query, fn func(body string) error) error {
	var after int64 = -1
	if _, err := sqldb.NumberAuditEvents(ctx, s.db, orgID); err != nil {
		return err
	}
	for {
		sel, err := s.selectEvents(orgID, q)
		if err != nil {
			return err
		}
		if after >= 0 {
			if q.Descending {
				sel = sel.Where("seq < ?", after)
			} else {
				sel = sel.Where("seq > ?", after)
			}
		}
		var rows []sqldb.AuditEventRow
		if err := sel.Column("seq", "body").Limit(int64(eachBatch)).Scan(ctx, &rows); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return models.Unavailable(fmt.Errorf("read audit events: %w", err))
		}
		for _, r := range rows {
			if err := fn(r.Body); err != nil {
				return err
			}
		}
		if len(rows) < eachBatch {
			return nil
		}
		after = rows[len(rows)-1].Sequence
	}
}

const eachBatch = 1000

// selectEvents is the query of q's numbered events of the organization,
// ordered, without paging. The caller numbers the events committed so far
// first (sqldb.NumberAuditEvents).
func (s *EventStore) selectEvents(orgID int64, q Query) (*bun.SelectQuery, error) {
	sel := s.db.NewSelect().Model((*sqldb.AuditEventRow)(nil)).Where("org_id = ? AND seq IS NOT NULL", orgID)
	if q.Filter != nil {
		where, args, err := EventListing.Where(s.db.Dialect().Name(), q.Filter)
		if err != nil {
			return nil, &listing.ParamError{Param: "filter", Detail: err.Error()}
		}
		sel = sel.Where(where, args...)
	}
	if !q.Since.IsZero() {
		sel = sel.Where("published >= ?", q.Since.UTC())
	}
	if !q.Until.IsZero() {
		sel = sel.Where("published < ?", q.Until.UTC())
	}
	if q.Descending {
		return sel.OrderExpr("seq DESC"), nil
	}
	return sel.OrderExpr("seq ASC"), nil
}

// Get returns one event of the organization by id. ENOTFOUND when it is
// not the organization's.
func (s *EventStore) Get(ctx context.Context, orgID, id int64) (json.RawMessage, error) {
	if _, err := sqldb.NumberAuditEvents(ctx, s.db, orgID); err != nil {
		return nil, err
	}
	var row sqldb.AuditEventRow
	err := s.db.NewSelect().Model(&row).Column("body").Where("org_id = ? AND id = ? AND seq IS NOT NULL", orgID, id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrEventNotFound
	}
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("get audit event: %w", err))
	}
	return json.RawMessage(row.Body), nil
}

// NumberPending numbers the events of every organization that has
// committed events without a number yet (on PostgreSQL, where they are
// numbered after they commit: sqldb.NumberAuditEvents) and returns how
// many organizations it numbered. The API runs it every second, so that a
// reader finds about a second of events to number, whoever reads.
func (s *EventStore) NumberPending(ctx context.Context) (int, error) {
	return sqldb.NumberPendingAuditEvents(ctx, s.db)
}

// hash names q's selection (filter, bounds, order) in its cursors, so that
// a cursor of one query is refused by another.
func (q Query) hash() string {
	filter := ""
	if q.Filter != nil {
		filter = q.Filter.String()
	}
	key := strings.Join([]string{filter, q.Since.UTC().Format(time.RFC3339Nano), q.Until.UTC().Format(time.RFC3339Nano), fmt.Sprint(q.Descending)}, "\x00")
	sum := sha256.Sum256([]byte(key))
	return base64.RawURLEncoding.EncodeToString(sum[:6])
}

// writeCursor is the cursor of the page after sequence seq of the query
// hashed hash: the query's hash, then the sequence, in URL-safe base64.
func writeCursor(seq int64, hash string) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seq)) //nolint:gosec // sequences are positive
	return hash + "." + base64.RawURLEncoding.EncodeToString(b[:])
}

// readCursor returns the sequence a cursor of the query hashed hash points
// after; 0 for no cursor.
func readCursor(text, hash string) (int64, error) {
	if text == "" {
		return 0, nil
	}
	bad := &listing.ParamError{Param: "cursor", Detail: "is not a cursor of this list; use the next_cursor of a page of the same query"}
	h, enc, ok := strings.Cut(text, ".")
	if !ok || h != hash {
		return 0, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(b) != 8 {
		return 0, bad
	}
	seq := int64(binary.BigEndian.Uint64(b)) //nolint:gosec // checked below
	if seq < 0 {
		return 0, bad
	}
	return seq, nil
}

// ParseFilter parses a filter of EventListing's attributes.
func ParseFilter(text string) (listing.Expr, error) {
	p, err := listing.Parse(map[string][]string{"filter": {text}}, EventListing)
	if err != nil {
		return nil, err
	}
	return p.Filter, nil
}
