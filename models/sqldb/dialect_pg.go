package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
)

// PGDialect is PostgreSQL's SQL. The bulk paths of chunked jobs talk to
// pgx directly: array parameters and COPY travel in the binary protocol,
// where bun would format every value of a many-thousand-row statement into
// its SQL text.
type PGDialect struct{}

func (PGDialect) LockRows(q *bun.SelectQuery, strength string) *bun.SelectQuery {
	return q.For(strength)
}

func (PGDialect) clockMillis() string {
	return "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
}

func (PGDialect) InsertBlobChunk() string {
	return "INSERT INTO blob_chunks (blob_id, seq, data) VALUES ($1, $2, $3)"
}

func (PGDialect) migrationTypes() sqlTypes {
	return sqlTypes{Postgres: true, Time: "TIMESTAMPTZ", Blob: "BYTEA", JSON: "JSONB"}
}

func (PGDialect) QueueWrites(*sync.Mutex) func() { return func() {} }

// WithPgxTx runs fn in a transaction on a pgx connection taken from db's
// pool, committing when fn returns nil.
func WithPgxTx(ctx context.Context, db *bun.DB, fn func(tx pgx.Tx) error) error {
	conn, err := db.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("take a connection: %w", err)
	}
	defer func() { _ = conn.Close() }() // returns it to the pool
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the PostgreSQL driver is %T, not pgx", dc)
		}
		return pgx.BeginFunc(ctx, sc.Conn(), fn)
	})
}

func (PGDialect) EmailLocalPart(col string) string {
	return "split_part(" + col + ", '@', 1)"
}

// insertAuditEvents inserts org's events unnumbered, in one statement
// whose text is the same for every transaction (the events travel as
// arrays, past bun's formatting), so that each connection prepares it
// once. They get their numbers after they commit (numberAuditEvents): no
// writer waits for another organization's writer, or its own.
//
// Most transactions record one event: it travels as plain parameters,
// with nothing to encode into arrays and unnest.
func (PGDialect) insertAuditEvents(ctx context.Context, tx bun.Tx, org int64, evs []unnumbered) error {
	var query string
	var args []any
	if len(evs) == 1 {
		r := &evs[0].row
		query, args = insertAuditEventPG, []any{org, r.ID, r.Published, r.EventType, r.ActorType, r.ActorID, r.Result,
			r.RequestID, r.TargetType, r.TargetID, r.JobID, evs[0].unnumberedBody()}
	} else {
		query, args = insertAuditEventsPG, auditEventArgs(org, evs)
	}
	res, err := tx.Tx.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("insert audit events: %w", err)
	}
	if got, err := res.RowsAffected(); err == nil && got != int64(len(evs)) {
		return fmt.Errorf("insert audit events: %d rows inserted of %d", got, len(evs))
	}
	return nil
}

// lockAuditHeadPG makes the numbering of an organization's events one at
// a time: held to the end of the numbering's transaction, so that the
// next one reads its numbers and the rows it numbered.
const lockAuditHeadPG = "SELECT pg_advisory_xact_lock(?::int4, ?::int4)"

// auditLockSpace is the first key of lockAuditHeadPG (identity's manager
// lock is 0x1a0001).
const auditLockSpace int32 = 0x1a0002

// numberAuditEvents numbers the organization's committed events that have
// no number yet, in id order after its last number, numberBatch at a time,
// each batch in a transaction of its own under the organization's
// numbering lock, and returns the last number. A batch and the head move
// together, and a batch starts only after the one before it committed, so
// a reader that sees number n sees every number before it.
func (PGDialect) numberAuditEvents(ctx context.Context, db bun.IDB, org int64) (int64, error) {
	var head int64
	for {
		var pending bool
		if err := db.QueryRowContext(ctx, pendingAuditEventsPG, org).Scan(&pending); err != nil {
			return 0, fmt.Errorf("look for unnumbered audit events: %w", err)
		}
		if !pending {
			break
		}
		n := 0
		err := InTxOnce(ctx, db, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.ExecContext(ctx, lockAuditHeadPG, auditLockSpace, int32(org)); err != nil { //nolint:gosec // the key is the id's low 32 bits: two organizations sharing them only queue together
				return fmt.Errorf("lock the audit head: %w", err)
			}
			if _, err := tx.ExecContext(ctx, numberSettingPG); err != nil {
				return fmt.Errorf("plan the numbering: %w", err)
			}
			var err error
			if head, err = auditHead(ctx, tx, org); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, numberAuditEventsPG, org, head, numberBatch)
			if err != nil {
				return fmt.Errorf("number audit events: %w", err)
			}
			affected, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("number audit events: %w", err)
			}
			n = int(affected)
			if n == 0 {
				return nil
			}
			head += affected
			_, err = tx.ExecContext(ctx, `INSERT INTO audit_heads (org_id, last_seq) VALUES (?, ?)
				ON CONFLICT (org_id) DO UPDATE SET last_seq = excluded.last_seq`, org, head)
			return err
		})
		if err != nil {
			return 0, err
		}
		if n < numberBatch {
			return head, nil
		}
	}
	return auditHead(ctx, db, org)
}

// pendingAuditOrgs reads the audit_events_pending index.
func (PGDialect) pendingAuditOrgs(ctx context.Context, db bun.IDB) ([]int64, error) {
	var orgs []int64
	err := db.NewRaw("SELECT DISTINCT org_id FROM audit_events WHERE seq IS NULL ORDER BY org_id").Scan(ctx, &orgs)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("find unnumbered audit events: %w", err)
	}
	return orgs, nil
}

// numberBatch is how many events a numbering transaction numbers at most.
const numberBatch = 10000

// pendingAuditEventsPG says whether the organization has unnumbered
// events: a probe of the audit_events_pending index.
const pendingAuditEventsPG = "SELECT EXISTS (SELECT 1 FROM audit_events WHERE org_id = ? AND seq IS NULL)"

// numberAuditEventsPG numbers at most ?2 of the organization's (?0)
// unnumbered events, in id order, after ?1. Each gets its number; its body
// gets the number in place of the 0 it was written with (the first
// ',"sequence":' is the key's: only the id's and the organization's digits
// come before it); its hash is the SHA-256 of that body (as EventHash).
//
// The batch and the rows it updates are both read through
// audit_events_pending (the other indexes cover only numbered rows), the
// rows bounded by the batch's last id, and joined by hash (numberSettingPG):
// each is read once, whatever the statistics say of the pending rows.
const numberAuditEventsPG = `WITH batch AS (
	SELECT id, ?1::bigint + row_number() OVER (ORDER BY id) AS seq,
		overlay(body PLACING (?1::bigint + row_number() OVER (ORDER BY id))::text FROM strpos(body, ',"sequence":0,') + 12 FOR 1) AS body
	FROM (SELECT id, body FROM audit_events WHERE org_id = ?0 AND seq IS NULL ORDER BY id LIMIT ?2) q
)
UPDATE audit_events e SET seq = b.seq, body = b.body, hash = encode(sha256(convert_to(b.body, 'UTF8')), 'hex')
FROM batch b
WHERE e.org_id = ?0 AND e.seq IS NULL AND e.id <= (SELECT max(id) FROM batch) AND e.id = b.id`

// numberSettingPG keeps the numbering's join off nested loops: the
// statistics of the pending rows are often stale (they come and go within
// a second), and a nested loop planned for one pending row that meets
// thousands reads the batch once per row.
const numberSettingPG = "SET LOCAL enable_nestloop = off"

// auditEventArgs are insertAuditEventsPG's parameters for org's events.
func auditEventArgs(org int64, evs []unnumbered) []any {
	n := len(evs)
	ids, jobs := make([]int64, n), make([]*int64, n)
	published := make([]time.Time, n)
	texts := make([][]string, 8) // event_type … target_id, body
	for i := range texts {
		texts[i] = make([]string, n)
	}
	for i := range evs {
		r := &evs[i].row
		ids[i], published[i], jobs[i] = r.ID, r.Published, r.JobID
		for j, v := range [...]string{r.EventType, r.ActorType, r.ActorID, r.Result, r.RequestID, r.TargetType, r.TargetID,
			evs[i].unnumberedBody()} {
			texts[j][i] = v
		}
	}
	return []any{org, ids, published, texts[0], texts[1], texts[2], texts[3],
		texts[4], texts[5], texts[6], jobs, texts[7]}
}

// insertAuditEventsPG inserts the organization's ($1) events, given as
// arrays of their columns, unnumbered: no seq nor hash, the body with 0
// for its number.
const insertAuditEventsPG = `INSERT INTO audit_events (org_id, id, published, event_type, actor_type, actor_id, result,
	request_id, target_type, target_id, job_id, body)
SELECT $1, e.* FROM unnest($2::bigint[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
	$9::text[], $10::text[], $11::bigint[], $12::text[]) AS e`

// insertAuditEventPG is insertAuditEventsPG for one event.
const insertAuditEventPG = `INSERT INTO audit_events (org_id, id, published, event_type, actor_type, actor_id, result,
	request_id, target_type, target_id, job_id, body)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`
