package sqldb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"

	"iam/models"
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
	if _, err := tx.Tx.ExecContext(ctx, lockAuditHeadPG, auditLockSpace, int32(org)); err != nil { //nolint:gosec // the key is the id's low 32 bits: two organizations sharing them only queue together
		return fmt.Errorf("lock the audit head: %w", err)
	}
	res, err := tx.Tx.ExecContext(ctx, insertAuditEventsPG, auditEventArgs(org, evs)...)
	if err != nil {
		return fmt.Errorf("number and insert audit events: %w", err)
	}
	if got, err := res.RowsAffected(); err == nil && got != int64(len(evs)) {
		return fmt.Errorf("number and insert audit events: %d rows inserted of %d", got, len(evs))
	}
	return nil
}

// lockAuditHeadPG queues the writers of an organization's events in the
// lock manager before they touch its audit_heads row. A waiter for the row
// itself keeps the row's page pinned while it waits, and a pinned page is
// not pruned, so under many writers the row's versions (one per write)
// pile up for every later writer to walk past.
const lockAuditHeadPG = "SELECT pg_advisory_xact_lock($1::int4, $2::int4)"

// auditLockSpace is the first key of lockAuditHeadPG (identity's manager
// lock is 0x1a0001).
const auditLockSpace int32 = 0x1a0002

// auditEventArgs are insertAuditEventsPG's parameters for org's events.
func auditEventArgs(org int64, evs []unnumbered) []any {
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
	return []any{org, n, ids, published, texts[0], texts[1], texts[2], texts[3],
		texts[4], texts[5], texts[6], jobs, texts[7], texts[8]}
}

// runTx runs fn in a transaction on a connection of its own, so that its
// end can be pipelined: the events' INSERT, which takes the organization's
// audit_heads row lock, travels to the server with COMMIT, in one round
// trip. The lock is held for the server's own work only, never across a
// round trip to this process: every writer of an organization queues on
// that row, and on a busy machine a round trip is long (the holder waits
// for a CPU to read the answer and send the COMMIT). database/sql cannot
// be told that its transaction ended, so the pipeline also sends BEGIN,
// and the transaction's own Commit ends that empty one. A transaction
// without events commits as usual.
func (PGDialect) runTx(ctx context.Context, db *bun.DB, fn func(ctx context.Context, tx bun.Tx) error) (again bool, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return models.IsTransient(err), err
	}
	defer func() { _ = conn.Close() }() // returns it to the pool
	return runTxOn(ctx, conn, fn, func(ctx context.Context, tx bun.Tx, events []models.AuditEvent) (bool, error) {
		return commitPipelined(ctx, conn, tx, events)
	})
}

// commitPipelined is runTx's commitFunc on conn, the connection of tx.
func commitPipelined(ctx context.Context, conn bun.Conn, tx bun.Tx, events []models.AuditEvent) (again bool, err error) {
	batches, err := eventBatches(ctx, events)
	if err != nil {
		return false, err
	}
	if len(batches) == 0 {
		return commitTx(tx)
	}
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the PostgreSQL driver is %T, not pgx", dc)
		}
		again, err = commitWithEventsPipelined(ctx, sc.Conn(), batches)
		return err
	})
	if err != nil {
		return again, err
	}
	// Ends the empty transaction the pipeline began. The change has
	// committed whatever this answers; a connection left in a transaction
	// is not reused (pgx's ResetSession drops it).
	_ = tx.Commit()
	return false, nil
}

// commitWithEventsPipelined sends the events' INSERTs, COMMIT and BEGIN
// in one round trip on conn, whose transaction holds the change, and
// reads their answers. again says that err is transient and the
// transaction certainly did not commit: an INSERT refused (the server
// skips the rest of the pipeline), or a COMMIT refused with a
// serialization failure or deadlock. A failure to talk to the server
// leaves the commit unknown: not again.
func commitWithEventsPipelined(ctx context.Context, conn *pgx.Conn, batches []orgEvents) (again bool, err error) {
	b := &pgx.Batch{}
	for _, e := range batches {
		b.Queue(lockAuditHeadPG, auditLockSpace, int32(e.org)) //nolint:gosec // as in insertAuditEvents
		b.Queue(insertAuditEventsPG, auditEventArgs(e.org, e.events)...)
	}
	b.Queue("COMMIT")
	b.Queue("BEGIN")
	br := conn.SendBatch(ctx, b)
	defer func() {
		if closeErr := br.Close(); err == nil && closeErr != nil {
			err = closeErr
		}
	}()
	for _, e := range batches {
		_, err = br.Exec() // the lock
		if err == nil {
			var tag pgconn.CommandTag
			tag, err = br.Exec()
			if err == nil && tag.RowsAffected() != int64(len(e.events)) {
				return false, fmt.Errorf("number and insert audit events: %d rows inserted of %d", tag.RowsAffected(), len(e.events))
			}
		}
		if err != nil {
			var pgErr *pgconn.PgError
			return errors.As(err, &pgErr) && models.IsTransient(err), fmt.Errorf("number and insert audit events: %w", err)
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return commitRolledBack(err), err
	}
	if tag.String() == "ROLLBACK" {
		return false, pgx.ErrTxCommitRollback
	}
	_, err = br.Exec() // BEGIN
	return false, err
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
