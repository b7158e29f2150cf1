package jobs

import (
	"context"
	"fmt"
	"iam/models/sqldb"
	"time"

	"github.com/uptrace/bun"
)

func (jobsSQLite) recordChunk(ctx context.Context, db *bun.DB, orgID, id int64, results []JobResult, p JobProgress) error {
	return sqldb.InTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		return RecordChunkSQLite(ctx, tx, orgID, id, results, p)
	})
}

// RecordChunkSQLite records the job's absolute progress, then upserts its
// results, in the caller's transaction.
func RecordChunkSQLite(ctx context.Context, tx bun.Tx, orgID, id int64, results []JobResult, p JobProgress) error {
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
