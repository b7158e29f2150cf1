package enrollment

import (
	"context"
	"fmt"
	"iam/models/jobs"
	"iam/models/sqldb"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/uptrace/bun"
)

// upsertEnrollmentsPG is the chunk's upsert on PostgreSQL: the enrollments
// as one array per column, unnested into one INSERT … ON CONFLICT. Rows go
// in (user, factor config) order, so that two transactions writing the same
// users lock them in the same order.
const upsertEnrollmentsPG = `INSERT INTO enrollments AS e
	(org_id, user_id, factor_config_id, factor_type, value, secret, thumbprint, expires_at, job_id, source_row, updated_at)
SELECT $1, w.user_id, w.factor_config_id, w.factor_type, w.value, w.secret, w.thumbprint, w.expires_at, $2, w.source_row, $3
FROM unnest($4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::bytea[], $9::text[], $10::timestamptz[], $11::bigint[])
	AS w(user_id, factor_config_id, factor_type, value, secret, thumbprint, expires_at, source_row)
ORDER BY w.user_id, w.factor_config_id
ON CONFLICT (user_id, factor_config_id) DO UPDATE SET
	factor_type = EXCLUDED.factor_type, value = EXCLUDED.value, secret = EXCLUDED.secret,
	thumbprint = EXCLUDED.thumbprint, expires_at = EXCLUDED.expires_at, job_id = EXCLUDED.job_id,
	source_row = EXCLUDED.source_row, updated_at = EXCLUDED.updated_at
WHERE (e.job_id = EXCLUDED.job_id AND e.source_row = EXCLUDED.source_row) OR (e.job_id <> EXCLUDED.job_id AND $12)`

// applyEnrollChunk is ApplyChunk on PostgreSQL, in one pgx transaction.
func (enrollmentPG) applyEnrollChunk(ctx context.Context, db *bun.DB, c *EnrollChunk) (jobs.JobProgress, error) {
	now := time.Now().UTC()
	results, writes := c.plan(now)
	var p jobs.JobProgress
	err := sqldb.WithPgxTx(ctx, db, func(tx pgx.Tx) error {
		if len(writes) > 0 {
			n := len(writes)
			users, configs, rows := make([]int64, n), make([]int64, n), make([]int64, n)
			types, values, thumbs := make([]string, n), make([]string, n), make([]string, n)
			secrets := make([][]byte, n)
			expires := make([]pgtype.Timestamptz, n)
			for i := range writes {
				w := &writes[i]
				users[i], configs[i], rows[i] = w.UserID, w.FactorConfigID, w.SourceRow
				types[i], values[i], thumbs[i], secrets[i] = string(w.FactorType), w.Value, w.Thumbprint, w.Secret
				if w.ExpiresAt != nil {
					expires[i] = pgtype.Timestamptz{Time: *w.ExpiresAt, Valid: true}
				}
			}
			tag, err := tx.Exec(ctx, upsertEnrollmentsPG, c.OrgID, c.JobID, now,
				users, configs, types, values, secrets, thumbs, expires, rows, c.Overwrite)
			if err != nil {
				return fmt.Errorf("upsert enrollments: %w", err)
			}
			if int(tag.RowsAffected()) != n {
				if err := c.explainKeptPG(ctx, tx, results, writes); err != nil {
					return err
				}
			}
		}
		p = c.progressAfter(results)
		if err := jobs.RecordChunkPG(ctx, tx, c.OrgID, c.JobID, results, p); err != nil {
			return err
		}
		if c.NextOffset >= 0 {
			_, err := tx.Exec(ctx, `INSERT INTO enrollment_cursors (job_id, next_row, byte_offset) VALUES ($1, $2, $3)
				ON CONFLICT (job_id, next_row) DO NOTHING`, c.JobID, c.NextRow, c.NextOffset)
			if err != nil {
				return fmt.Errorf("insert cursor: %w", err)
			}
		}
		return nil
	})
	return p, err
}

// explainKeptPG finds which of the chunk's writes landed (the enrollment
// now carries the write's job and row) and explains the others.
func (c *EnrollChunk) explainKeptPG(ctx context.Context, tx pgx.Tx, results []jobs.JobResult, writes []Enrollment) error {
	users := make([]int64, 0, len(writes))
	for i := range writes {
		if i == 0 || writes[i].UserID != writes[i-1].UserID {
			users = append(users, writes[i].UserID)
		}
	}
	rows, err := tx.Query(ctx, `SELECT user_id, factor_config_id, job_id, source_row FROM enrollments
		WHERE org_id = $1 AND user_id = ANY($2)`, c.OrgID, users)
	if err != nil {
		return fmt.Errorf("select kept enrollments: %w", err)
	}
	var existing []Enrollment
	for rows.Next() {
		var e Enrollment
		if err := rows.Scan(&e.UserID, &e.FactorConfigID, &e.JobID, &e.SourceRow); err != nil {
			rows.Close()
			return fmt.Errorf("select kept enrollments: %w", err)
		}
		existing = append(existing, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("select kept enrollments: %w", err)
	}
	want := make(map[enrollmentKey]int64, len(writes))
	for _, w := range writes {
		want[enrollmentKey{w.UserID, w.FactorConfigID}] = w.SourceRow
	}
	written := make(map[enrollmentKey]bool, len(writes))
	for _, e := range existing {
		k := enrollmentKey{e.UserID, e.FactorConfigID}
		if row, ok := want[k]; ok && e.JobID == c.JobID && e.SourceRow == row {
			written[k] = true
		}
	}
	c.explainKept(results, written, existing)
	return nil
}

// matchUsers looks each value up through the organization's index on the
// key: one indexed probe per value, whatever the planner knows of the table.
// (An IN list of thousands of values over an expression index without
// statistics is planned as a scan of every user of the organization.) A key
// that several users share matches the oldest of them.
func (enrollmentPG) matchUsers(ctx context.Context, db *bun.DB, orgID int64, key UserKey, values []string) (map[string]int64, error) {
	probe, err := userKeyProbe(key, "", "v.k")
	if err != nil {
		return nil, err
	}
	sort.Strings(values) // probes in index order
	// OFFSET 0 keeps the subquery a parameterized probe: flattened into a
	// join, it may be planned as a merge over the organization's whole index.
	return matchedUsers(db.DB.QueryContext(ctx, `SELECT v.k, u.id FROM unnest($2::text[]) AS v(k)
		CROSS JOIN LATERAL (SELECT id FROM users WHERE org_id = $1 AND `+probe+` OFFSET 0) AS u`, orgID, values))
}
