package management

import (
	"context"
	"encoding/json"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/jobs"
	"iam/models/sqldb"
	"time"

	"github.com/uptrace/bun"
)

// UploadResolveInput is the input of an upload's resolving job, stored with
// the job row: the file stays in the blob store (sealed).
type UploadResolveInput struct {
	UploadID int64  `json:"upload_id,string"`
	BlobID   int64  `json:"blob_id,string"`
	Encoding string `json:"encoding"` // csvimport.Lookup
	// DataOffset is the byte offset of the first row after the header.
	DataOffset int64 `json:"data_offset"`
}

// CreateResolvingUpload keeps an upload's file in the blob store and
// writes up (resolving, its FileRows counted by the caller) with the QUEUED
// job that resolves its rows, in one transaction after the file is stored
// (Store.CreateUploadJob); the caller starts the job's workflow after.
// Nothing is kept when it fails. EINVALID when the file has no rows or
// more than MaxUploadRows.
func (s *MgmtStore) CreateResolvingUpload(ctx context.Context, up *MgmtUpload, file jobs.FileUpload, encoding string, dataOffset int64) (*jobs.Job, error) {
	if up.FileRows == 0 {
		return nil, models.Invalid("file", "has no rows after the header")
	}
	if up.FileRows > MaxUploadRows {
		return nil, models.Invalid("file", "has %d rows; at most %d", up.FileRows, MaxUploadRows)
	}
	up.ID = sqldb.NewID()
	up.Status, up.RowCount, up.NextRow, up.NextOffset = UploadResolving, 0, 1, dataOffset
	up.CreatedAt = time.Now().UTC()
	job := &jobs.Job{ID: sqldb.NewID(), OrgID: up.OrgID, Kind: jobs.MgmtResolveJobKind, Module: MgmtModule, ActionName: "Resolve upload",
		Entity: "Upload row", CreatedBy: up.CreatedBy, Total: up.FileRows}
	up.JobID = &job.ID
	err := s.jobs.CreateUploadJobThen(ctx, job, file, func(blob *jobs.Blob) (json.RawMessage, error) {
		return json.Marshal(UploadResolveInput{UploadID: up.ID, BlobID: blob.ID, Encoding: encoding, DataOffset: dataOffset})
	}, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(up).Exec(ctx); err != nil {
			return fmt.Errorf("insert upload: %w", err)
		}
		return models.Record(ctx, models.AuditEvent{OrgID: up.OrgID, Type: audit.ManagementUploadCreated,
			Targets: []models.EventTarget{uploadTarget(up), jobTarget(job)}})
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// UploadByJob returns the upload a resolving job works on. ENOTFOUND when
// the upload is gone.
func (s *MgmtStore) UploadByJob(ctx context.Context, orgID, uploadID int64) (*MgmtUpload, error) {
	up := new(MgmtUpload)
	if err := s.db.NewSelect().Model(up).Where("org_id = ? AND id = ?", orgID, uploadID).Scan(ctx); err != nil {
		if models.IsNoRows(err) {
			return nil, ErrUploadNotFound
		}
		return nil, fmt.Errorf("select upload: %w", err)
	}
	return up, nil
}

// ResolvedChunk is what ResolveUploadChunk did: the chunk's rows (those
// stored before included), where the next chunk starts, and whether the
// upload is resolved.
type ResolvedChunk struct {
	Rows       []UploadRow
	NextRow    int64
	NextOffset int64
	Done       bool
}

// ResolveUploadChunk resolves records, the rows of a resolving upload from
// row number from on (read from the file up to byte offset end, done when
// they are its last), with the one resolver of uploads: a row naming a user
// a row of an earlier chunk maps is DUPLICATE_USER. The rows, the upload's
// row count and its cursor (next row and offset) are written in one
// transaction, the upload resolved after its last chunk. A chunk already
// written (a retry after its commit) changes nothing: its stored rows are
// returned. ECONFLICT when the upload is not resolving (failed) or from is
// past its cursor; ENOTFOUND when it is gone.
func (s *MgmtStore) ResolveUploadChunk(ctx context.Context, orgID, uploadID, from int64, records []UploadRecord, end int64, done bool) (*ResolvedChunk, error) {
	out := new(ResolvedChunk)
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		up := new(MgmtUpload)
		q := tx.NewSelect().Model(up).Where("org_id = ? AND id = ?", orgID, uploadID)
		if err := s.d.LockRows(q, "NO KEY UPDATE").Scan(ctx); err != nil {
			if models.IsNoRows(err) {
				return ErrUploadNotFound
			}
			return fmt.Errorf("select upload: %w", err)
		}
		if from < up.NextRow { // written before
			to := from + int64(len(records))
			if err := tx.NewSelect().Model(&out.Rows).Where("upload_id = ? AND row_no >= ? AND row_no < ?", uploadID, from, to).
				Order("row_no").Scan(ctx); err != nil {
				return fmt.Errorf("select upload rows: %w", err)
			}
			out.NextRow, out.NextOffset, out.Done = to, end, done
			return nil
		}
		if up.Status != UploadResolving {
			return errUploadNotResolved(up)
		}
		if from > up.NextRow {
			return models.Errorf(models.ECONFLICT, "the upload is resolved up to row %d, not %d", up.NextRow-1, from-1)
		}
		rows, err := resolveRows(ctx, tx, orgID, up.Header, records, func(ctx context.Context, ids []int64) (map[int64]int64, error) {
			var got []struct {
				UserID int64 `bun:"user_id"`
				RowNo  int64 `bun:"row_no"`
			}
			named := make(map[int64]int64)
			for start := 0; start < len(ids); start += 1000 {
				part := ids[start:min(start+1000, len(ids))]
				got = got[:0]
				if err := tx.NewSelect().Table("mgmt_upload_rows").Column("user_id").ColumnExpr("MIN(row_no) AS row_no").
					Where("upload_id = ? AND status = ? AND user_id IN (?)", uploadID, RowMapped, bun.List(part)).
					Group("user_id").Scan(ctx, &got); err != nil {
					return nil, fmt.Errorf("select mapped rows: %w", err)
				}
				for _, g := range got {
					named[g.UserID] = g.RowNo
				}
			}
			return named, nil
		})
		if err != nil {
			return err
		}
		for i := range rows {
			rows[i].UploadID = uploadID
		}
		for start := 0; start < len(rows); start += 500 {
			part := rows[start:min(start+500, len(rows))]
			if _, err := tx.NewInsert().Model(&part).Exec(ctx); err != nil {
				return fmt.Errorf("insert upload rows: %w", err)
			}
		}
		out.Rows, out.NextRow, out.NextOffset, out.Done = rows, from+int64(len(rows)), end, done
		u := tx.NewUpdate().Model((*MgmtUpload)(nil)).Set("row_count = row_count + ?", len(rows)).
			Set("next_row = ?", out.NextRow).Set("next_offset = ?", end).Where("id = ?", uploadID)
		if done {
			u = u.Set("status = ?", UploadResolved)
		}
		if _, err := u.Exec(ctx); err != nil {
			return fmt.Errorf("update upload: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FailUpload ends a resolving upload failed, saying why (its job could not
// finish). An upload resolved or failed already is left as it is.
func (s *MgmtStore) FailUpload(ctx context.Context, orgID, uploadID int64, why string) error {
	_, err := s.db.NewUpdate().Model((*MgmtUpload)(nil)).Set("status = ?", UploadFailed).Set("message = ?", truncate(why, 512)).
		Where("org_id = ? AND id = ? AND status = ?", orgID, uploadID, UploadResolving).Exec(ctx)
	if err != nil {
		return fmt.Errorf("fail upload: %w", err)
	}
	return nil
}

// FailUploadOfJob fails the upload that job jobID was resolving, if it is
// still resolving, saying why, in the transaction that ends or deletes the
// job (JobStore.Finish, JobStore.Delete): an upload is never left resolving
// with no job to resolve it, and reading it never writes. A job that
// resolves no upload changes nothing (the index mgmt_uploads_resolving_job
// holds only resolving uploads).
func FailUploadOfJob(ctx context.Context, tx bun.IDB, jobID int64, why string) error {
	_, err := tx.NewUpdate().Model((*MgmtUpload)(nil)).Set("status = ?", UploadFailed).Set("message = ?", truncate(why, 512)).
		Where("job_id = ? AND status = ?", jobID, UploadResolving).Exec(ctx)
	if err != nil {
		return fmt.Errorf("fail the job's upload: %w", err)
	}
	return nil
}

// UploadRows returns an upload's rows numbered from to before to, in order.
func (s *MgmtStore) UploadRows(ctx context.Context, uploadID, from, to int64) ([]UploadRow, error) {
	var rows []UploadRow
	if err := s.db.NewSelect().Model(&rows).Where("upload_id = ? AND row_no >= ? AND row_no < ?", uploadID, from, to).
		Order("row_no").Scan(ctx); err != nil {
		return nil, fmt.Errorf("select upload rows: %w", err)
	}
	return rows, nil
}
