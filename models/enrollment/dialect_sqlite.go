package enrollment

import (
	"context"
	"encoding/json"
	"fmt"
	"iam/models/jobs"
	"iam/models/sqldb"
	"time"

	"github.com/uptrace/bun"
)

// matchUsers passes the values as one JSON array, each looked up through
// the organization's index on the key; an IN list of thousands of literals
// costs more to parse than to run. CROSS JOIN makes the values the outer
// loop whatever the planner knows: without statistics (no ANALYZE yet) it
// would otherwise scan every user once per value.
func (enrollmentSQLite) matchUsers(ctx context.Context, db *bun.DB, orgID int64, key UserKey, values []string) (map[string]int64, error) {
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

// applyEnrollChunk is ApplyChunk on SQLite, in one transaction.
func (enrollmentSQLite) applyEnrollChunk(ctx context.Context, db *bun.DB, c *EnrollChunk) (jobs.JobProgress, error) {
	var p jobs.JobProgress
	err := sqldb.InTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
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
		if err := jobs.RecordChunkSQLite(ctx, tx, c.OrgID, c.JobID, results, p); err != nil {
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
