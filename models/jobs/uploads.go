package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"iam/models/sqldb"
	"io"

	"github.com/uptrace/bun"
)

// FileUpload is a file a job is created for: its name and type, and its
// bytes (a spooled copy of the request's file part, say).
type FileUpload struct {
	Name        string
	ContentType string
	Body        io.Reader
	MaxSize     int64
}

// CreateUploadJob keeps an uploaded file in the blob store and writes job as
// QUEUED for it. The file is written first, chunk by chunk in short
// transactions, as an incomplete blob; then one short transaction completes
// the blob, ties it to the job and inserts the job, whose input input
// returns once the blob is known. When anything fails nothing is kept; a
// process that dies half way leaves an incomplete blob the sweep removes.
// The blob is deleted when the job ends or is deleted.
func (s *JobStore) CreateUploadJob(ctx context.Context, job *Job, file FileUpload, input func(*Blob) (json.RawMessage, error)) error {
	return s.CreateUploadJobThen(ctx, job, file, input, nil)
}

// CreateUploadJobThen is CreateUploadJob writing also (when not nil) in the
// transaction that inserts the job, after it.
func (s *JobStore) CreateUploadJobThen(ctx context.Context, job *Job, file FileUpload, input func(*Blob) (json.RawMessage, error),
	also func(ctx context.Context, tx bun.Tx) error) error {
	blob, err := s.blobs.Stage(ctx, job.OrgID, file.Name, file.ContentType, file.Body, file.MaxSize)
	if err != nil {
		return err
	}
	if err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if job.ID == 0 {
			job.ID = sqldb.NewID()
		}
		if err := s.blobs.complete(ctx, tx, blob, job.ID); err != nil {
			return err
		}
		var err error
		if job.Input, err = input(blob); err != nil {
			return err
		}
		if err := InsertJob(ctx, tx, job); err != nil {
			return err
		}
		if also != nil {
			return also(ctx, tx)
		}
		return nil
	}); err != nil {
		if derr := s.blobs.Delete(context.WithoutCancel(ctx), job.OrgID, blob.ID); derr != nil {
			err = errors.Join(err, derr)
		}
		return err
	}
	return nil
}
