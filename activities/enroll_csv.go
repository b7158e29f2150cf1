package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"iam/models/csvimport"
	"iam/models/enrollment"
	"iam/models/jobs"
)

// EnrollCSVJob names a CSV enrollment job and its input.
type EnrollCSVJob struct {
	Job    jobs.JobRef               `json:"job"`
	Params enrollment.EnrollCSVInput `json:"params"`
}

// EnrollCSVChunk asks for the rows of a CSV enrollment job from row From on,
// at most Params.ChunkRows of them.
type EnrollCSVChunk struct {
	Job    jobs.JobRef               `json:"job"`
	Params enrollment.EnrollCSVInput `json:"params"`
	From   int64                     `json:"from"`
	Before Progress                  `json:"before"` // progress before this chunk
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
	defer func() { _ = rc.Close() }() // only read: a failed close loses nothing
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
	store := a.Store.Enrollments
	if err := store.SetCursor(ctx, in.Job.JobID, 1, in.Params.DataOffset); err != nil {
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
//
// While the chunk is written, the next one is read, validated and matched
// in the background (a.ahead): the next activity of the job finds it ready
// when this worker runs it. Preparing a chunk only reads, and the writes
// keep their order, so this changes nothing but the time it takes.
func (a *Enrollment) EnrollCSVRows(ctx context.Context, in EnrollCSVChunk) (EnrollChunkResult, error) {
	clock := newStepClock()
	rd, err := a.csvReading(ctx, in.Job.OrgID, in.Params)
	if err != nil {
		return EnrollChunkResult{}, err
	}
	store := a.Store.Enrollments
	offset, err := store.Cursor(ctx, in.Job.JobID, in.From)
	if err != nil {
		return EnrollChunkResult{}, temporalError(err)
	}
	here := aheadKey{job: in.Job.JobID, row: in.From, offset: offset}
	chunk, err := a.ahead.take(ctx, here)
	if chunk == nil || err != nil {
		if chunk, err = a.prepareCSVChunk(ctx, in.Job.OrgID, rd, here); err != nil {
			return EnrollChunkResult{}, err
		}
	}
	clock.lap("prepare")
	next := in.From + int64(len(chunk.rows))
	if !chunk.done {
		there := aheadKey{job: in.Job.JobID, row: next, offset: chunk.end}
		a.ahead.start(there, func(ctx context.Context) (*csvChunk, error) {
			return a.prepareCSVChunk(ctx, in.Job.OrgID, rd, there)
		})
	}
	heartbeat(ctx, next)
	progress, err := store.ApplyChunk(ctx, &enrollment.EnrollChunk{
		OrgID: in.Job.OrgID, JobID: in.Job.JobID, Overwrite: in.Params.Overwrite,
		Rows: chunk.rows, Before: in.Before, NextRow: next, NextOffset: chunk.end, Names: rd.plan.names,
	})
	if err != nil {
		return EnrollChunkResult{}, temporalError(err)
	}
	testHookChunkCommitted()
	clock.lap("apply")
	return EnrollChunkResult{Progress: progress, Next: next, Done: chunk.done}, nil
}

// csvReading is what reading a job's rows needs: the file's encoding and
// columns, the user key and the factor configs.
type csvReading struct {
	params  enrollment.EnrollCSVInput
	enc     csvimport.Encoding
	plan    *factorPlan
	cols    csvimport.Columns
	userKey enrollment.UserKey
	size    int
}

func (a *Enrollment) csvReading(ctx context.Context, orgID int64, p enrollment.EnrollCSVInput) (*csvReading, error) {
	enc, ok := csvimport.Lookup(p.Encoding)
	if !ok {
		return nil, invalidInput("unknown file encoding %q", p.Encoding)
	}
	plan, err := a.plan(ctx, orgID, p.FactorConfigIDs)
	if err != nil {
		return nil, temporalError(err)
	}
	cols, problems := csvimport.CheckHeader(p.Header, enrollment.UserColumns, needs(plan.configs))
	if len(problems) > 0 {
		return nil, invalidInput("the file's header does not fit the factor configs: %s", problems[0].Detail)
	}
	userKey, _ := enrollment.ParseUserKey(cols.UserColumn)
	size := p.ChunkRows
	if size <= 0 {
		size = enrollment.DefaultEnrollChunkRows
	}
	return &csvReading{params: p, enc: enc, plan: plan, cols: cols, userKey: userKey, size: size}, nil
}

// csvChunk is a chunk read, validated and matched: the rows ApplyChunk
// writes, the byte offset after the last of them, and whether the file
// has no rows after them.
type csvChunk struct {
	rows []enrollment.ChunkRow
	end  int64
	done bool
}

// prepareCSVChunk reads the chunk of rows starting at at, validates them,
// matches their users and seals their secrets.
func (a *Enrollment) prepareCSVChunk(ctx context.Context, orgID int64, rd *csvReading, at aheadKey) (*csvChunk, error) {
	rc, _, err := a.Store.Blobs.Open(ctx, orgID, rd.params.BlobID, at.offset)
	if err != nil {
		return nil, temporalError(err)
	}
	defer func() { _ = rc.Close() }() // only read: a failed close loses nothing
	r := csvimport.NewReader(rc, rd.enc, at.offset, at.row)
	rows := make([]pendingRow, 0, rd.size)
	out := &csvChunk{end: at.offset}
	for len(rows) < rd.size {
		rec, readErr := r.Read()
		if errors.Is(readErr, io.EOF) {
			out.done = true
			break
		}
		if readErr != nil {
			return nil, readErr
		}
		rows = append(rows, parseCSVRow(rec, rd.enc.Name, len(rd.params.Header), rd.cols, rd.userKey, rd.plan))
		out.end = rec.End
		if len(rows)%500 == 0 {
			heartbeat(ctx, rec.Row)
			if err = ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	if out.rows, err = a.finish(ctx, orgID, rd.userKey, rows); err != nil {
		return nil, err
	}
	return out, nil
}

// needs lists the CSV columns of the chosen factor configs.
func needs(configs []enrollment.FactorConfig) []csvimport.Need {
	var out []csvimport.Need
	for _, c := range configs {
		for _, col := range c.Columns() {
			out = append(out, csvimport.Need{Column: col, For: c.DisplayName})
		}
	}
	return out
}

// parseCSVRow validates one record into a pending row.
func parseCSVRow(rec csvimport.Record, encName string, width int, cols csvimport.Columns, key enrollment.UserKey, plan *factorPlan) pendingRow {
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
		e := enrollment.Enrollment{FactorConfigID: c.ID, FactorType: c.Type}
		switch c.Type {
		case enrollment.FactorEmailOTP:
			v, err := enrollment.NormalizeOTPEmail(field(enrollment.ColumnOTPEmail))
			if err != nil {
				row.fail("%s %v", enrollment.ColumnOTPEmail, err)
			}
			e.Value = v
		case enrollment.FactorSMSOTP:
			v, err := enrollment.NormalizeE164(field(enrollment.ColumnMobileNumber))
			if err != nil {
				row.fail("%s %v", enrollment.ColumnMobileNumber, err)
			}
			e.Value = v
		case enrollment.FactorTOTP:
			v, err := enrollment.NormalizeTOTPSecret(field(enrollment.ColumnTOTPSecret))
			if err != nil {
				row.fail("%s %v", enrollment.ColumnTOTPSecret, err)
			}
			if row.secret == nil {
				row.secret = map[int64]string{}
			}
			row.secret[c.ID] = v
		case enrollment.FactorSmartCard:
			info, err := certificateOf([]byte(field(enrollment.ColumnCertificate)))
			if err != nil {
				row.fail("%s: %v", enrollment.ColumnCertificate, err)
				break
			}
			e.Value, e.Thumbprint, e.ExpiresAt = info.Subject, info.Thumbprint, &info.NotAfter
			row.addCert(c.ID, info.Cert)
		}
		row.data = append(row.data, e)
	}
	return row
}

// certificateOf parses a certificate and refuses an expired one.
func certificateOf(data []byte) (*enrollment.CertificateInfo, error) {
	info, err := enrollment.ParseCertificate(data)
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
