package models

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/uptrace/bun"
)

// sqliteDialect is SQLite's SQL. Its bulk writes run one prepared statement
// execution per row: in process, that is cheaper than building and parsing
// one statement naming every value.
type sqliteDialect struct{}

// lockRows leaves q as it is: the store's write transactions are
// immediate (see sqliteDSN) and hold the whole database.
func (sqliteDialect) lockRows(q *bun.SelectQuery, _ string) *bun.SelectQuery { return q }

// lockManagerChanges does nothing: the single writer serializes them.
func (sqliteDialect) lockManagerChanges(context.Context, bun.Tx, int64) error { return nil }

func (sqliteDialect) clockMillis() string {
	return "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
}

func (sqliteDialect) insertBlobChunk() string {
	return "INSERT INTO blob_chunks (blob_id, seq, data) VALUES (?, ?, ?)"
}

func (sqliteDialect) checkinRead() string { return sqliteCheckinRead }

const sqliteCheckinRead = `SELECT d.org_id, d.secret_hash, d.reported_digest, d.checkin_interval_seconds, d.uninstall_requested_at,
	c.id, c.type, c.args
FROM devices d LEFT JOIN device_commands c ON c.device_id = d.id AND c.status = 'pending'
WHERE d.id = ? ORDER BY c.id`

// touchDevices writes the batch in one transaction, a statement a device.
// One process (iam dev) writes a SQLite file, so a later contact time in
// the row is one this process wrote within the same ContactFlushInterval
// (a check-in that changed something, an uninstall's ack): the batch may
// move it back by less than that interval, which is the precision of the
// batched times anyway. (Stored as text, times do not compare in SQL here
// the way PostgreSQL's do.)
func (sqliteDialect) touchDevices(ctx context.Context, db *bun.DB, batch []contactTouch) error {
	return inTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		for _, t := range batch {
			if _, err := tx.NewUpdate().Table("devices").Set("last_contact_time = ?", t.at).
				Set("inactive_after = ?", t.inactive).Where("id = ?", t.id).Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

func (sqliteDialect) migrationTypes() sqlTypes {
	return sqlTypes{Time: "TIMESTAMP", Blob: "BLOB", JSON: "TEXT"}
}

func (sqliteDialect) queueWrites(mu *sync.Mutex) func() {
	mu.Lock()
	return mu.Unlock
}

// matchUsers passes the values as one JSON array, each looked up through
// the organization's index on the key; an IN list of thousands of literals
// costs more to parse than to run. CROSS JOIN makes the values the outer
// loop whatever the planner knows: without statistics (no ANALYZE yet) it
// would otherwise scan every user once per value.
func (sqliteDialect) matchUsers(ctx context.Context, db *bun.DB, orgID int64, key UserKey, values []string) (map[string]int64, error) {
	probe, err := userKeyProbe(key, "u.", "v.value")
	if err != nil {
		return nil, err
	}
	list, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("match users: %w", err)
	}
	return matchedUsers(db.DB.QueryContext(ctx, `SELECT v.value, u.id FROM json_each(?) AS v
		CROSS JOIN users AS u ON u.org_id = ? AND `+probe, string(list), orgID))
}

func (sqliteDialect) recordChunk(ctx context.Context, db *bun.DB, orgID, id int64, results []JobResult, p JobProgress) error {
	return inTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		return recordChunkSQLite(ctx, tx, orgID, id, results, p)
	})
}

// recordChunkSQLite records the job's absolute progress, then upserts its
// results, in the caller's transaction.
func recordChunkSQLite(ctx context.Context, tx bun.Tx, orgID, id int64, results []JobResult, p JobProgress) error {
	res, err := tx.NewUpdate().Model((*Job)(nil)).
		Set("processed = ?", p.Processed).
		Set("total = ?", p.Total).
		Set("success_count = ?", p.Success).
		Set("error_count = ?", p.Failed).
		Set("updated_at = ?", time.Now().UTC()).
		Where("org_id = ? AND id = ? AND status = ?", orgID, id, JobRunning).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("record job progress: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return whyNotRunning(ctx, tx, orgID, id)
	}
	if len(results) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO job_results (job_id, seq, entity_id, status, message) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (job_id, seq) DO UPDATE SET entity_id = excluded.entity_id, status = excluded.status, message = excluded.message`)
	if err != nil {
		return fmt.Errorf("record job results: %w", err)
	}
	defer func() { _ = stmt.Close() }() // a statement of the transaction, closed with it anyway
	for i := range results {
		r := &results[i]
		r.JobID = id
		if _, err := stmt.ExecContext(ctx, r.JobID, r.Seq, r.EntityID, r.Status, r.Message); err != nil {
			return fmt.Errorf("record job results: %w", err)
		}
	}
	return nil
}

// applyEnrollChunk is ApplyChunk on SQLite, in one transaction.
func (sqliteDialect) applyEnrollChunk(ctx context.Context, db *bun.DB, c *EnrollChunk) (JobProgress, error) {
	var p JobProgress
	err := inTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		results, writes := c.plan(time.Now().UTC())
		written := map[enrollmentKey]bool{}
		if err := upsertEnrollmentsSQLite(ctx, tx, c.Overwrite, writes, written); err != nil {
			return err
		}
		if len(written) != len(writes) {
			users := c.keptUsers(results, written)
			var existing []Enrollment
			err := tx.NewSelect().Model(&existing).Column("user_id", "factor_config_id", "job_id", "source_row").
				Where("org_id = ? AND user_id IN (?)", c.OrgID, bun.List(users)).Scan(ctx)
			if err != nil {
				return fmt.Errorf("select kept enrollments: %w", err)
			}
			c.explainKept(results, written, existing)
		}
		p = c.progressAfter(results)
		if err := recordChunkSQLite(ctx, tx, c.OrgID, c.JobID, results, p); err != nil {
			return err
		}
		if c.NextOffset >= 0 {
			return setCursor(ctx, tx, c.JobID, c.NextRow, c.NextOffset)
		}
		return nil
	})
	return p, err
}

// upsertEnrollmentsSQLite upserts writes one prepared statement execution
// each, and marks in written those that landed.
func upsertEnrollmentsSQLite(ctx context.Context, tx bun.Tx, overwrite bool, writes []Enrollment, written map[enrollmentKey]bool) error {
	if len(writes) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO enrollments AS e
		(org_id, user_id, factor_config_id, factor_type, value, secret, thumbprint, expires_at, job_id, source_row, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (user_id, factor_config_id) DO UPDATE SET
			factor_type = excluded.factor_type, value = excluded.value, secret = excluded.secret,
			thumbprint = excluded.thumbprint, expires_at = excluded.expires_at, job_id = excluded.job_id,
			source_row = excluded.source_row, updated_at = excluded.updated_at
		WHERE (e.job_id = excluded.job_id AND e.source_row = excluded.source_row) OR (e.job_id <> excluded.job_id AND ?)`)
	if err != nil {
		return fmt.Errorf("upsert enrollments: %w", err)
	}
	defer func() { _ = stmt.Close() }() // a statement of the transaction, closed with it anyway
	for i := range writes {
		w := &writes[i]
		var secret, expires any // NULL unless set
		if len(w.Secret) > 0 {
			secret = w.Secret
		}
		if w.ExpiresAt != nil {
			expires = w.ExpiresAt.UTC()
		}
		res, err := stmt.ExecContext(ctx, w.OrgID, w.UserID, w.FactorConfigID, string(w.FactorType), w.Value, secret,
			w.Thumbprint, expires, w.JobID, w.SourceRow, w.UpdatedAt, overwrite)
		if err != nil {
			return fmt.Errorf("upsert enrollments: %w", err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			written[enrollmentKey{w.UserID, w.FactorConfigID}] = true
		}
	}
	return nil
}

func (sqliteDialect) emailLocalPart(col string) string {
	return "CASE WHEN instr(" + col + ", '@') > 0 THEN substr(" + col + ", 1, instr(" + col + ", '@') - 1) ELSE " + col + " END"
}

// writeSyncBatch writes a statement per kind of row (an UPDATE per link).
func (sqliteDialect) writeSyncBatch(ctx context.Context, tx bun.Tx, w *syncWrite) error {
	return writeSyncBatchRows(ctx, tx, w)
}
