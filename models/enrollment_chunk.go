package models

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// ChunkRow is one row of an enrollment file after parsing, validation and
// user matching. A row with Error set is recorded as an ERROR result and
// writes nothing; otherwise Enrollments (one per chosen factor config, for
// UserID) are written.
type ChunkRow struct {
	Row         int64
	UserID      int64
	Error       string
	Enrollments []Enrollment
}

// EnrollChunk is the work of one chunk of an enrollment job.
type EnrollChunk struct {
	OrgID, JobID int64
	// Overwrite replaces enrollment data written by anyone else; without
	// it such data is kept.
	Overwrite bool
	Rows      []ChunkRow
	// Before is the job's progress before the chunk; Processed after it is
	// NextRow-1 and Total is kept (raised to Processed if lower).
	Before JobProgress
	// NextRow is the first row after the chunk. When NextOffset is not
	// negative it is recorded as the byte offset at which NextRow starts.
	NextRow    int64
	NextOffset int64
	// Names gives the display name of each factor config, for messages.
	Names map[int64]string
}

type enrollmentKey struct{ user, config int64 }

// ApplyChunk writes a chunk in one transaction, set-based: every
// enrollment in one multi-row upsert, every row's result and the job's new
// absolute progress through JobStore.RecordChunk, and the next row's byte
// offset. It returns the progress recorded.
//
// Running it again for the same rows leaves the same state and the same
// results: a row's own earlier write (same job and row) is rewritten, never
// counted as a conflict. A user named by an earlier row of the same file is
// an error for the later row; data written by anything else is replaced
// only with Overwrite. ENOTFOUND when the job was deleted; ECONFLICT when it
// is not running.
//
// On PostgreSQL (outside a caller's transaction) the chunk travels as
// arrays and COPY in pgx's binary protocol; SQLite takes bun's statements.
func (s *EnrollmentStore) ApplyChunk(ctx context.Context, c *EnrollChunk) (JobProgress, error) {
	if pool := pgxPool(s.db); pool != nil {
		return s.applyChunkPG(ctx, pool, c)
	}
	var p JobProgress
	err := inTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		results, err := s.writeChunk(ctx, tx, c)
		if err != nil {
			return err
		}
		p = c.progressAfter(results)
		jobs := &JobStore{db: tx}
		if err := jobs.RecordChunk(ctx, c.OrgID, c.JobID, results, p); err != nil {
			return err
		}
		if c.NextOffset >= 0 {
			return s.SetCursor(ctx, tx, c.JobID, c.NextRow, c.NextOffset)
		}
		return nil
	})
	return p, err
}

// progressAfter is the job's absolute progress once results are recorded.
func (c *EnrollChunk) progressAfter(results []JobResult) JobProgress {
	p := c.Before
	for _, r := range results {
		if r.Status == ResultSuccess {
			p.Success++
		} else {
			p.Failed++
		}
	}
	p.Processed = c.NextRow - 1
	p.Total = max(p.Total, p.Processed)
	return p
}

// plan returns every row's result as if all its writes land, and the
// enrollments to write: rows that failed write nothing, and a user named
// twice in the chunk is written by its first row only.
func (c *EnrollChunk) plan(now time.Time) ([]JobResult, []Enrollment) {
	results := make([]JobResult, len(c.Rows))
	firstRow := make(map[int64]int64, len(c.Rows)) // user -> first row of this chunk naming it
	writes := make([]Enrollment, 0, len(c.Rows))
	for i := range c.Rows {
		row := &c.Rows[i]
		results[i] = JobResult{Seq: row.Row, Status: ResultError, Message: row.Error}
		if row.UserID != 0 {
			results[i].EntityID = FormatID(row.UserID)
		}
		if row.Error != "" {
			continue
		}
		if first, dup := firstRow[row.UserID]; dup {
			results[i].Message = fmt.Sprintf("the user is also in row %d; a user may appear in one row only", first)
			continue
		}
		firstRow[row.UserID] = row.Row
		for _, e := range row.Enrollments {
			e.OrgID, e.UserID, e.JobID, e.SourceRow, e.UpdatedAt = c.OrgID, row.UserID, c.JobID, row.Row, now
			writes = append(writes, e)
		}
		results[i].Status = ResultSuccess
	}
	return results, writes
}

// writeChunk upserts the chunk's enrollments and returns every row's result.
func (s *EnrollmentStore) writeChunk(ctx context.Context, tx bun.Tx, c *EnrollChunk) ([]JobResult, error) {
	results, writes := c.plan(time.Now().UTC())
	written := map[enrollmentKey]bool{}
	if !IsPostgres(tx) {
		if err := upsertEnrollmentsSQLite(ctx, tx, c.Overwrite, writes, written); err != nil {
			return nil, err
		}
	} else if len(writes) > 0 {
		var landed []struct {
			UserID         int64 `bun:"user_id"`
			FactorConfigID int64 `bun:"factor_config_id"`
		}
		_, err := tx.NewInsert().Model(&writes).
			On("CONFLICT (user_id, factor_config_id) DO UPDATE").
			Set("factor_type = EXCLUDED.factor_type").
			Set("value = EXCLUDED.value").
			Set("secret = EXCLUDED.secret").
			Set("thumbprint = EXCLUDED.thumbprint").
			Set("expires_at = EXCLUDED.expires_at").
			Set("job_id = EXCLUDED.job_id").
			Set("source_row = EXCLUDED.source_row").
			Set("updated_at = EXCLUDED.updated_at").
			Where("(?TableAlias.job_id = EXCLUDED.job_id AND ?TableAlias.source_row = EXCLUDED.source_row) OR (?TableAlias.job_id <> EXCLUDED.job_id AND ?)", c.Overwrite).
			Returning("user_id, factor_config_id").
			Exec(ctx, &landed)
		if err != nil {
			return nil, fmt.Errorf("upsert enrollments: %w", err)
		}
		for _, l := range landed {
			written[enrollmentKey{l.UserID, l.FactorConfigID}] = true
		}
	}
	if len(written) == len(writes) {
		return results, nil
	}
	users := c.keptUsers(results, written)
	var existing []Enrollment
	err := tx.NewSelect().Model(&existing).Column("user_id", "factor_config_id", "job_id", "source_row").
		Where("org_id = ? AND user_id IN (?)", c.OrgID, bun.In(users)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select kept enrollments: %w", err)
	}
	c.explainKept(results, written, existing)
	return results, nil
}

// upsertEnrollmentsSQLite upserts writes one prepared statement execution
// each, and marks in written those that landed.
func upsertEnrollmentsSQLite(ctx context.Context, tx bun.Tx, overwrite bool, writes []Enrollment, written map[enrollmentKey]bool) error {
	if len(writes) == 0 {
		return nil
	}
	stmt, err := tx.Tx.PrepareContext(ctx, `INSERT INTO enrollments AS e
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
	defer stmt.Close()
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

// keptUsers lists the users of rows that succeeded so far but whose writes
// did not all land.
func (c *EnrollChunk) keptUsers(results []JobResult, written map[enrollmentKey]bool) []int64 {
	var users []int64
	for i, row := range c.Rows {
		if results[i].Status != ResultSuccess {
			continue
		}
		for _, e := range row.Enrollments {
			if !written[enrollmentKey{row.UserID, e.FactorConfigID}] {
				users = append(users, row.UserID)
				break
			}
		}
	}
	return users
}

// explainKept turns the results of rows whose writes did not all land into
// what happened, given the enrollments the kept users have now: the user is
// in an earlier row of the same file (an error), or the user's existing data
// was kept (an error when nothing was written).
func (c *EnrollChunk) explainKept(results []JobResult, written map[enrollmentKey]bool, existing []Enrollment) {
	byKey := make(map[enrollmentKey]Enrollment, len(existing))
	for _, e := range existing {
		byKey[enrollmentKey{e.UserID, e.FactorConfigID}] = e
	}
	for i, row := range c.Rows {
		if results[i].Status != ResultSuccess {
			continue
		}
		var kept []string
		earlier := int64(0)
		for _, e := range row.Enrollments {
			k := enrollmentKey{row.UserID, e.FactorConfigID}
			if written[k] {
				continue
			}
			if ex := byKey[k]; ex.JobID == c.JobID {
				earlier = ex.SourceRow
			}
			kept = append(kept, c.Names[e.FactorConfigID])
		}
		switch {
		case len(kept) == 0:
		case earlier != 0:
			results[i].Status = ResultError
			results[i].Message = fmt.Sprintf("the user is also in row %d; a user may appear in one row only", earlier)
		case len(kept) == len(row.Enrollments):
			results[i].Status = ResultError
			results[i].Message = "already enrolled in " + joinSorted(kept) + "; kept the existing data (overwrite_enrollment_data is false)"
		default:
			results[i].Message = "kept the existing data of " + joinSorted(kept) + " (overwrite_enrollment_data is false)"
		}
	}
}

func joinSorted(names []string) string {
	sort.Strings(names)
	return strings.Join(names, ", ")
}
