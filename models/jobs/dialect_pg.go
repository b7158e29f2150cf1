package jobs

import (
	"context"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/sqldb"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"
)

func (jobsPG) recordChunk(ctx context.Context, db *bun.DB, orgID, id int64, results []JobResult, p JobProgress) error {
	return sqldb.WithPgxTx(ctx, db, func(tx pgx.Tx) error {
		return RecordChunkPG(ctx, tx, orgID, id, results, p)
	})
}

// RecordChunkPG is JobStore.RecordChunk inside a pgx transaction: the
// job's absolute progress (which also locks the job's row, so that two
// attempts at the same chunk take turns), then the results: the rows of
// their seqs deleted and the new ones copied in, which leaves what an upsert
// by (job, seq) would, without a statement that names every value.
func RecordChunkPG(ctx context.Context, tx pgx.Tx, orgID, id int64, results []JobResult, p JobProgress) error {
	tag, err := tx.Exec(ctx, `UPDATE jobs SET processed = $1, total = $2, success_count = $3, error_count = $4, updated_at = $5
		WHERE org_id = $6 AND id = $7 AND status = $8`,
		p.Processed, p.Total, p.Success, p.Failed, time.Now().UTC(), orgID, id, string(JobRunning))
	if err != nil {
		return fmt.Errorf("record job progress: %w", err)
	}
	if tag.RowsAffected() == 0 {
		var status string
		err = tx.QueryRow(ctx, `SELECT status FROM jobs WHERE org_id = $1 AND id = $2`, orgID, id).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrJobNotFound
		}
		if err != nil {
			return fmt.Errorf("read job status: %w", err)
		}
		return models.Errorf(models.ECONFLICT, "the job is %s, not RUNNING", status)
	}
	if len(results) == 0 {
		return nil
	}
	first, last, consecutive := results[0].Seq, results[len(results)-1].Seq, true
	for i := range results {
		results[i].JobID = id
		if results[i].Seq != first+int64(i) {
			consecutive = false
		}
	}
	if consecutive {
		_, err = tx.Exec(ctx, `DELETE FROM job_results WHERE job_id = $1 AND seq BETWEEN $2 AND $3`, id, first, last)
	} else {
		seqs := make([]int64, len(results))
		for i := range results {
			seqs[i] = results[i].Seq
		}
		_, err = tx.Exec(ctx, `DELETE FROM job_results WHERE job_id = $1 AND seq = ANY($2)`, id, seqs)
	}
	if err != nil {
		return fmt.Errorf("replace job results: %w", err)
	}
	i := 0
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"job_results"}, []string{"job_id", "seq", "entity_id", "status", "message"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == len(results) {
				return nil, nil
			}
			r := &results[i]
			i++
			return []any{r.JobID, r.Seq, r.EntityID, r.Status, r.Message}, nil
		}))
	if err != nil {
		return fmt.Errorf("record job results: %w", err)
	}
	return nil
}
