package models

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/uptrace/bun"
)

// Blob describes an uploaded file. Its bytes live in the blob store, never in
// a workflow's history.
type Blob struct {
	bun.BaseModel `bun:"table:blobs"`

	ID          int64     `bun:"id,pk"`
	OrgID       int64     `bun:"org_id"`
	Name        string    `bun:"name"`
	ContentType string    `bun:"content_type"`
	Size        int64     `bun:"size"`
	SHA256      string    `bun:"sha256"`
	CreatedAt   time.Time `bun:"created_at"`
}

// BlobStore keeps uploaded files. Put streams: a file is never held whole in
// memory.
type BlobStore interface {
	// Put reads r to its end into a new blob of the organization, inside db
	// (the caller's transaction, or nil for one of its own). ETOOLARGE when r
	// holds more than maxSize bytes; nothing is kept then.
	Put(ctx context.Context, db bun.IDB, orgID int64, name, contentType string, r io.Reader, maxSize int64) (*Blob, error)
	// Open returns the blob's bytes from offset on. ENOTFOUND when missing.
	Open(ctx context.Context, orgID, id, offset int64) (io.ReadCloser, *Blob, error)
	// Delete removes a blob. Deleting a missing blob is not an error.
	Delete(ctx context.Context, db bun.IDB, orgID, id int64) error
}

// blobChunkSize is the size of one stored piece of a blob.
const blobChunkSize = 1 << 20

type blobChunk struct {
	bun.BaseModel `bun:"table:blob_chunks"`

	BlobID int64  `bun:"blob_id,pk"`
	Seq    int64  `bun:"seq,pk"`
	Data   []byte `bun:"data"`
}

// DBBlobStore is the default BlobStore: blobs in the app database, in 1 MiB
// chunks.
type DBBlobStore struct{ db bun.IDB }

// Put implements BlobStore.
func (s *DBBlobStore) Put(ctx context.Context, db bun.IDB, orgID int64, name, contentType string, r io.Reader, maxSize int64) (*Blob, error) {
	if db == nil {
		db = s.db
	}
	blob := &Blob{ID: NewID(), OrgID: orgID, Name: name, ContentType: contentType, CreatedAt: time.Now().UTC()}
	// Once: the upload is read as it is written.
	err := inTxOnce(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(blob).Exec(ctx); err != nil {
			return fmt.Errorf("insert blob: %w", err)
		}
		// The chunk travels as a bound parameter (binary with pgx), not
		// formatted into the statement's text as bun would.
		insertChunk := "INSERT INTO blob_chunks (blob_id, seq, data) VALUES (?, ?, ?)"
		if IsPostgres(tx) {
			insertChunk = "INSERT INTO blob_chunks (blob_id, seq, data) VALUES ($1, $2, $3)"
		}
		hash := sha256.New()
		buf := make([]byte, blobChunkSize)
		for seq := int64(0); ; seq++ {
			n, err := io.ReadFull(r, buf)
			if n > 0 {
				blob.Size += int64(n)
				if maxSize > 0 && blob.Size > maxSize {
					return &Error{Code: ETOOLARGE, Field: "file", Detail: fmt.Sprintf("the file is larger than %d bytes", maxSize)}
				}
				hash.Write(buf[:n])
				if _, err := tx.Tx.ExecContext(ctx, insertChunk, blob.ID, seq, buf[:n]); err != nil {
					return fmt.Errorf("insert blob chunk: %w", err)
				}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("read upload: %w", err)
			}
		}
		blob.SHA256 = hex.EncodeToString(hash.Sum(nil))
		_, err := tx.NewUpdate().Model(blob).Column("size", "sha256").WherePK().Exec(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return blob, nil
}

// Open implements BlobStore. The reader fetches one chunk at a time.
func (s *DBBlobStore) Open(ctx context.Context, orgID, id, offset int64) (io.ReadCloser, *Blob, error) {
	blob := new(Blob)
	err := s.db.NewSelect().Model(blob).Where("org_id = ? AND id = ?", orgID, id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, NotFound("File", "the uploaded file does not exist")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("select blob: %w", err)
	}
	if offset < 0 || offset > blob.Size {
		return nil, nil, Invalid("offset", "is outside the file")
	}
	return &blobReader{ctx: ctx, db: s.db, id: id, seq: offset / blobChunkSize, skip: offset % blobChunkSize}, blob, nil
}

// Delete implements BlobStore.
func (s *DBBlobStore) Delete(ctx context.Context, db bun.IDB, orgID, id int64) error {
	if db == nil {
		db = s.db
	}
	return inTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewDelete().Model((*Blob)(nil)).Where("org_id = ? AND id = ?", orgID, id).Exec(ctx)
		if err != nil {
			return fmt.Errorf("delete blob: %w", err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			// SQLite enforces the cascade only where foreign keys are on; say it plainly.
			if _, err := tx.NewDelete().Model((*blobChunk)(nil)).Where("blob_id = ?", id).Exec(ctx); err != nil {
				return fmt.Errorf("delete blob chunks: %w", err)
			}
		}
		return nil
	})
}

// blobReader reads a blob chunk by chunk.
type blobReader struct {
	ctx  context.Context
	db   bun.IDB
	id   int64
	seq  int64
	skip int64
	cur  []byte
	done bool
}

func (r *blobReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.done {
			return 0, io.EOF
		}
		chunk := new(blobChunk)
		err := r.db.NewSelect().Model(chunk).Where("blob_id = ? AND seq = ?", r.id, r.seq).Scan(r.ctx)
		if errors.Is(err, sql.ErrNoRows) {
			r.done = true
			return 0, io.EOF
		}
		if err != nil {
			return 0, fmt.Errorf("read blob chunk: %w", err)
		}
		r.seq++
		r.cur = chunk.Data
		if r.skip > 0 {
			r.cur = r.cur[min(r.skip, int64(len(r.cur))):]
			r.skip = 0
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

func (r *blobReader) Close() error { r.done, r.cur = true, nil; return nil }
