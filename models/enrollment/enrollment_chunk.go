package enrollment

import (
	"context"
	"fmt"
	"iam/models"
	"iam/models/jobs"
	"sort"
	"strings"
	"time"
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
	Before jobs.JobProgress
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
// On PostgreSQL the chunk travels as arrays and COPY in pgx's binary
// protocol; SQLite runs one prepared statement per write (Dialect).
func (s *EnrollmentStore) ApplyChunk(ctx context.Context, c *EnrollChunk) (jobs.JobProgress, error) {
	return s.d.applyEnrollChunk(ctx, s.db, c)
}

// progressAfter is the job's absolute progress once results are recorded.
func (c *EnrollChunk) progressAfter(results []jobs.JobResult) jobs.JobProgress {
	p := c.Before
	for _, r := range results {
		if r.Status == jobs.ResultSuccess {
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
func (c *EnrollChunk) plan(now time.Time) ([]jobs.JobResult, []Enrollment) {
	results := make([]jobs.JobResult, len(c.Rows))
	firstRow := make(map[int64]int64, len(c.Rows)) // user -> first row of this chunk naming it
	writes := make([]Enrollment, 0, len(c.Rows))
	for i := range c.Rows {
		row := &c.Rows[i]
		results[i] = jobs.JobResult{Seq: row.Row, Status: jobs.ResultError, Message: row.Error}
		if row.UserID != 0 {
			results[i].EntityID = models.FormatID(row.UserID)
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
		results[i].Status = jobs.ResultSuccess
	}
	return results, writes
}

// keptUsers lists the users of rows that succeeded so far but whose writes
// did not all land.
func (c *EnrollChunk) keptUsers(results []jobs.JobResult, written map[enrollmentKey]bool) []int64 {
	var users []int64
	for i, row := range c.Rows {
		if results[i].Status != jobs.ResultSuccess {
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
func (c *EnrollChunk) explainKept(results []jobs.JobResult, written map[enrollmentKey]bool, existing []Enrollment) {
	byKey := make(map[enrollmentKey]Enrollment, len(existing))
	for _, e := range existing {
		byKey[enrollmentKey{e.UserID, e.FactorConfigID}] = e
	}
	for i, row := range c.Rows {
		if results[i].Status != jobs.ResultSuccess {
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
			results[i].Status = jobs.ResultError
			results[i].Message = fmt.Sprintf("the user is also in row %d; a user may appear in one row only", earlier)
		case len(kept) == len(row.Enrollments):
			results[i].Status = jobs.ResultError
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
