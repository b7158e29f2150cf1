package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"iam/models"
	"iam/models/csvimport"
)

// EnrollCSVJob names a CSV enrollment job and its input.
type EnrollCSVJob struct {
	Job    JobRef                `json:"job"`
	Params models.EnrollCSVInput `json:"params"`
}

// EnrollCSVChunk asks for the rows of a CSV enrollment job from row From on,
// at most Params.ChunkRows of them.
type EnrollCSVChunk struct {
	Job    JobRef                `json:"job"`
	Params models.EnrollCSVInput `json:"params"`
	From   int64                 `json:"from"`
	Before Progress              `json:"before"` // progress before this chunk
}

// CountEnrollCSVRows reads the file once to count its rows, records the
// total as the job's progress, and records where row 1 starts.
func (a *Enrollment) CountEnrollCSVRows(ctx context.Context, in EnrollCSVJob) (Progress, error) {
	enc, ok := csvimport.Lookup(in.Params.Encoding)
	if !ok {
		return Progress{}, invalidInput("unknown file encoding %q", in.Params.Encoding)
	}
	rc, _, err := a.Store.Blobs.Open(ctx, in.Job.OrgID, in.Params.BlobID, in.Params.DataOffset)
	if err != nil {
		return Progress{}, temporalError(err)
	}
	defer rc.Close()
	r := csvimport.NewReader(rc, enc, in.Params.DataOffset, 1)
	var n int64
	for {
		_, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Progress{}, err
		}
		n++
		if n%10000 == 0 {
			heartbeat(ctx, n)
			if err := ctx.Err(); err != nil {
				return Progress{}, err
			}
		}
	}
	store := models.NewEnrollmentStore(a.Store.DB)
	if err := store.SetCursor(ctx, nil, in.Job.JobID, 1, in.Params.DataOffset); err != nil {
		return Progress{}, err
	}
	p := Progress{Total: n}
	if err := a.Store.Jobs.RecordChunk(ctx, in.Job.OrgID, in.Job.JobID, nil, p); err != nil {
		return Progress{}, temporalError(err)
	}
	return p, nil
}

// EnrollCSVRows processes one chunk: it reads the chunk's rows from the
// byte offset the previous chunk recorded, validates each row's data,
// matches the users in one query, and writes enrollments, per-row results,
// progress and the next offset in one transaction (ApplyChunk).
func (a *Enrollment) EnrollCSVRows(ctx context.Context, in EnrollCSVChunk) (EnrollChunkResult, error) {
	p := in.Params
	clock := newStepClock()
	enc, ok := csvimport.Lookup(p.Encoding)
	if !ok {
		return EnrollChunkResult{}, invalidInput("unknown file encoding %q", p.Encoding)
	}
	plan, err := a.plan(ctx, in.Job.OrgID, p.FactorConfigIDs)
	if err != nil {
		return EnrollChunkResult{}, temporalError(err)
	}
	cols, problems := csvimport.CheckHeader(p.Header, models.UserColumns, needs(plan.configs))
	if len(problems) > 0 {
		return EnrollChunkResult{}, invalidInput("the file's header does not fit the factor configs: %s", problems[0].Detail)
	}
	userKey, _ := models.ParseUserKey(cols.UserColumn)
	store := models.NewEnrollmentStore(a.Store.DB)
	offset, err := store.Cursor(ctx, in.Job.JobID, in.From)
	if err != nil {
		return EnrollChunkResult{}, temporalError(err)
	}
	rc, _, err := a.Store.Blobs.Open(ctx, in.Job.OrgID, p.BlobID, offset)
	if err != nil {
		return EnrollChunkResult{}, temporalError(err)
	}
	defer rc.Close()

	size := p.ChunkRows
	if size <= 0 {
		size = models.DefaultEnrollChunkRows
	}
	r := csvimport.NewReader(rc, enc, offset, in.From)
	rows := make([]pendingRow, 0, size)
	end, done := offset, false
	for len(rows) < size {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			done = true
			break
		}
		if err != nil {
			return EnrollChunkResult{}, err
		}
		rows = append(rows, parseCSVRow(rec, enc.Name, len(p.Header), cols, userKey, plan))
		end = rec.End
		if len(rows)%500 == 0 {
			heartbeat(ctx, rec.Row)
			if err := ctx.Err(); err != nil {
				return EnrollChunkResult{}, err
			}
		}
	}
	clock.lap("read+parse")
	chunk, err := a.finish(ctx, in.Job.OrgID, userKey, rows)
	if err != nil {
		return EnrollChunkResult{}, err
	}
	clock.lap("match+seal")
	next := in.From + int64(len(rows))
	heartbeat(ctx, next)
	progress, err := store.ApplyChunk(ctx, &models.EnrollChunk{
		OrgID: in.Job.OrgID, JobID: in.Job.JobID, Overwrite: p.Overwrite,
		Rows: chunk, Before: in.Before, NextRow: next, NextOffset: end, Names: plan.names,
	})
	if err != nil {
		return EnrollChunkResult{}, temporalError(err)
	}
	clock.lap("apply")
	return EnrollChunkResult{Progress: progress, Next: next, Done: done}, nil
}

// needs lists the CSV columns of the chosen factor configs.
func needs(configs []models.FactorConfig) []csvimport.Need {
	var out []csvimport.Need
	for _, c := range configs {
		for _, col := range c.Columns() {
			out = append(out, csvimport.Need{Column: col, For: c.DisplayName})
		}
	}
	return out
}

// parseCSVRow validates one record into a pending row.
func parseCSVRow(rec csvimport.Record, encName string, width int, cols csvimport.Columns, key models.UserKey, plan *factorPlan) pendingRow {
	row := pendingRow{row: rec.Row}
	switch {
	case errors.Is(rec.Err, csvimport.ErrInvalidEncoding):
		row.fail("the row is not valid %s text", encName)
		return row
	case rec.Err != nil:
		row.fail("%v", rec.Err)
		return row
	case len(rec.Fields) != width:
		row.fail("the row has %d fields; the header has %d", len(rec.Fields), width)
		return row
	}
	field := func(col string) string { return rec.Fields[cols.Index[col]] }
	row.key = key.NormalizeKey(field(cols.UserColumn))
	if row.key == "" {
		row.fail("%s is empty", cols.UserColumn)
	}
	for _, c := range plan.configs {
		e := models.Enrollment{FactorConfigID: c.ID, FactorType: c.Type}
		switch c.Type {
		case models.FactorEmailOTP:
			v, err := models.NormalizeOTPEmail(field(models.ColumnOTPEmail))
			if err != nil {
				row.fail("%s %v", models.ColumnOTPEmail, err)
			}
			e.Value = v
		case models.FactorSMSOTP:
			v, err := models.NormalizeE164(field(models.ColumnMobileNumber))
			if err != nil {
				row.fail("%s %v", models.ColumnMobileNumber, err)
			}
			e.Value = v
		case models.FactorTOTP:
			v, err := models.NormalizeTOTPSecret(field(models.ColumnTOTPSecret))
			if err != nil {
				row.fail("%s %v", models.ColumnTOTPSecret, err)
			}
			if row.secret == nil {
				row.secret = map[int64]string{}
			}
			row.secret[c.ID] = v
		case models.FactorSmartCard:
			info, err := certificateOf([]byte(field(models.ColumnCertificate)))
			if err != nil {
				row.fail("%s: %v", models.ColumnCertificate, err)
				break
			}
			e.Value, e.Thumbprint, e.ExpiresAt = info.Subject, info.Thumbprint, &info.NotAfter
		}
		row.data = append(row.data, e)
	}
	return row
}

// certificateOf parses a certificate and refuses an expired one.
func certificateOf(data []byte) (*models.CertificateInfo, error) {
	info, err := models.ParseCertificate(data)
	if err != nil {
		return nil, err
	}
	if info.NotAfter.Before(time.Now()) {
		return nil, fmt.Errorf("the certificate expired on %s", info.NotAfter.Format(time.DateOnly))
	}
	return info, nil
}

// chunkSteps, when set (profiling tests), receives the time each step of a
// chunk took.
var chunkSteps func(step string, d time.Duration)

type stepClock struct{ last time.Time }

func newStepClock() *stepClock { return &stepClock{last: time.Now()} }

func (c *stepClock) lap(step string) {
	if chunkSteps == nil {
		return
	}
	now := time.Now()
	chunkSteps(step, now.Sub(c.last))
	c.last = now
}
