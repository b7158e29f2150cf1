package activities

import (
	"context"
	"errors"
	"io"
	"strconv"

	"iam/models/csvimport"
	"iam/models/jobs"
	"iam/models/management"
)

// MgmtResolveChunk asks for the next Rows rows of a large upload, from row
// number From, to be resolved.
type MgmtResolveChunk struct {
	Job    jobs.JobRef                   `json:"job"`
	Params management.UploadResolveInput `json:"params"`
	From   int64                         `json:"from"`
	Rows   int                           `json:"rows"`
	Before Progress                      `json:"before"`
}

// MgmtResolveResult is where a resolve chunk ended.
type MgmtResolveResult struct {
	Next     int64    `json:"next"`
	Done     bool     `json:"done"`
	Progress Progress `json:"progress"`
}

// ResolveUploadRows resolves a chunk of a large upload: it reads the
// chunk's rows from the file (the sealed blob) at the byte offset the
// previous chunk recorded, resolves them with the one resolver of uploads
// and writes them with the upload's cursor in one transaction
// (models.MgmtStore.ResolveUploadChunk), then copies each row's outcome to
// the job (MAPPED a success, the others errors) with the absolute
// progress. A chunk retried after its commit reads nothing and returns the
// rows written.
func (a *Management) ResolveUploadRows(ctx context.Context, in MgmtResolveChunk) (MgmtResolveResult, error) {
	org := in.Job.OrgID
	m := a.Store.Management
	up, err := m.UploadByJob(ctx, org, in.Params.UploadID)
	if err != nil {
		return MgmtResolveResult{}, temporalError(err)
	}
	var chunk *management.ResolvedChunk
	if in.From < up.NextRow { // committed before
		to := min(in.From+int64(in.Rows), up.NextRow)
		rows, err := m.UploadRows(ctx, up.ID, in.From, to)
		if err != nil {
			return MgmtResolveResult{}, err
		}
		chunk = &management.ResolvedChunk{Rows: rows, NextRow: to, Done: to > up.FileRows}
	} else {
		records, end, done, err := a.readUploadRows(ctx, org, in.Params, up.NextOffset, in.From, in.Rows)
		if err != nil {
			return MgmtResolveResult{}, err
		}
		done = done || in.From+int64(len(records)) > up.FileRows
		heartbeat(ctx, in.From)
		if chunk, err = m.ResolveUploadChunk(ctx, org, up.ID, in.From, records, end, done); err != nil {
			return MgmtResolveResult{}, temporalError(err)
		}
	}
	testHookChunkCommitted()
	p := in.Before
	p.Total = up.FileRows
	results := make([]jobs.JobResult, len(chunk.Rows))
	for i, r := range chunk.Rows {
		res := jobs.JobResult{Seq: r.RowNo, EntityID: strconv.FormatInt(r.RowNo, 10), Status: jobs.ResultSuccess, Message: r.Status}
		p.Processed++
		if r.Status == management.RowMapped {
			p.Success++
		} else {
			res.Status, res.Message = jobs.ResultError, r.Status+": "+r.Message
			p.Failed++
		}
		results[i] = res
	}
	if err := a.Store.Jobs.RecordChunk(ctx, org, in.Job.JobID, results, p); err != nil {
		return MgmtResolveResult{}, temporalError(err)
	}
	return MgmtResolveResult{Next: chunk.NextRow, Done: chunk.Done, Progress: p}, nil
}

// readUploadRows reads up to n records of an upload's file from byte
// offset (row number from on), and returns them with the offset after the
// last and whether the file ended.
func (a *Management) readUploadRows(ctx context.Context, org int64, in management.UploadResolveInput, offset, from int64, n int) ([]management.UploadRecord, int64, bool, error) {
	enc, ok := csvimport.Lookup(in.Encoding)
	if !ok {
		return nil, 0, false, invalidInput("unknown file encoding %q", in.Encoding)
	}
	rc, _, err := a.Store.Blobs.Open(ctx, org, in.BlobID, offset)
	if err != nil {
		return nil, 0, false, temporalError(err)
	}
	defer func() { _ = rc.Close() }() // only read: a failed close loses nothing
	r := csvimport.NewReader(rc, enc, offset, from)
	records := make([]management.UploadRecord, 0, n)
	end := offset
	for len(records) < n {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return records, end, true, nil
		}
		if err != nil {
			return nil, 0, false, err
		}
		ur := management.UploadRecord{RowNo: rec.Row, Fields: rec.Fields}
		if rec.Err != nil {
			ur.Problem = rec.Err.Error()
		}
		records = append(records, ur)
		end = rec.End
	}
	return records, end, false, nil
}
