package sqldb

import (
	"context"
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

// insertAuditEvents takes the numbers of org's events and inserts them in
// one statement: the numbers go into the bodies and the bodies are hashed
// (SHA-256, as EventHash) in the database, so that no round trip separates
// the numbering from the commit. The statement's text is the same for
// every transaction (the events travel as arrays, past bun's formatting),
// so that each connection prepares it once.
func (PGDialect) insertAuditEvents(ctx context.Context, tx bun.Tx, org int64, evs []unnumbered) error {
	n := len(evs)
	ids, jobs := make([]int64, n), make([]*int64, n)
	published := make([]time.Time, n)
	texts := make([][]string, 9) // event_type … target_id, body_head, body_tail
	for i := range texts {
		texts[i] = make([]string, n)
	}
	for i := range evs {
		r := &evs[i].row
		ids[i], published[i], jobs[i] = r.ID, r.Published, r.JobID
		for j, v := range [...]string{r.EventType, r.ActorType, r.ActorID, r.Result, r.RequestID, r.TargetType, r.TargetID,
			evs[i].bodyHead, evs[i].bodyTail} {
			texts[j][i] = v
		}
	}
	res, err := tx.Tx.ExecContext(ctx, insertAuditEventsPG, org, n, ids, published, texts[0], texts[1], texts[2], texts[3],
		texts[4], texts[5], texts[6], jobs, texts[7], texts[8])
	if err != nil {
		return fmt.Errorf("number and insert audit events: %w", err)
	}
	if got, err := res.RowsAffected(); err == nil && got != int64(n) {
		return fmt.Errorf("number and insert audit events: %d rows inserted of %d", got, n)
	}
	return nil
}

// insertAuditEventsPG takes the organization's next numbers ($1, $2
// events) and inserts the events, given as arrays of their columns, with
// their numbers put into their bodies between body_head and body_tail.
const insertAuditEventsPG = `WITH head AS (
	INSERT INTO audit_heads (org_id, last_seq) VALUES ($1, $2::bigint)
	ON CONFLICT (org_id) DO UPDATE SET last_seq = audit_heads.last_seq + excluded.last_seq
	RETURNING last_seq - $2::bigint AS base
), ev AS (
	SELECT e.*, head.base + e.i AS seq_no FROM head,
		unnest($3::bigint[], $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
			$11::text[], $12::bigint[], $13::text[], $14::text[])
		WITH ORDINALITY AS e (id, published, event_type, actor_type, actor_id, result, request_id, target_type, target_id,
			job_id, body_head, body_tail, i)
), numbered AS (
	SELECT ev.*, body_head || seq_no::text || body_tail AS body FROM ev
)
INSERT INTO audit_events (org_id, seq, id, published, event_type, actor_type, actor_id, result, request_id, target_type,
	target_id, job_id, body, hash)
SELECT $1, seq_no, id, published, event_type, actor_type, actor_id, result, request_id, target_type, target_id, job_id,
	body, encode(sha256(convert_to(body, 'UTF8')), 'hex')
FROM numbered`
