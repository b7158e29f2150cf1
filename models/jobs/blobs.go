package jobs

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

	"iam/models"
	"iam/models/secret"
	"iam/models/sqldb"
)

// Blob describes an uploaded file. Its bytes live in the blob store, never in
// a workflow's history.
//
// A blob's chunks are sealed with the store's secret.Box (AES-256-GCM, a fresh
// nonce per chunk, the organization, blob and chunk index as additional
// data, so a chunk does not open in another place). An upload's blob is
// written incomplete, chunk by chunk, and completed in the transaction that
// writes its job (JobID); it is deleted when the job ends or is deleted, and
// the sweep removes what a process that died left behind.
type Blob struct {
	bun.BaseModel `bun:"table:blobs"`

	ID          int64     `bun:"id,pk"`
	OrgID       int64     `bun:"org_id"`
	Name        string    `bun:"name"`
	ContentType string    `bun:"content_type"`
	Size        int64     `bun:"size"`
	SHA256      string    `bun:"sha256"`
	CreatedAt   time.Time `bun:"created_at"`
	// Complete is false while an upload's chunks are being written.
	Complete bool `bun:"complete"`
	// Sealed tells that the chunks are encrypted (every blob written with a
	// key; blobs of older versions are not).
	Sealed bool `bun:"sealed"`
	// JobID is the job the blob was uploaded for; nil for a template's files.
	JobID *int64 `bun:"job_id"`
}

// BlobStore keeps uploaded files. Put streams: a file is never held whole in
// memory.
type BlobStore interface {
	// Put reads r to its end into a new complete blob of the organization,
	// in a transaction of its own. ETOOLARGE when r holds more than maxSize
	// bytes; nothing is kept then.
	Put(ctx context.Context, orgID int64, name, contentType string, r io.Reader, maxSize int64) (*Blob, error)
	// Stage reads r to its end into a new incomplete blob, one short
	// transaction per chunk, and returns it with its size and hash: no
	// transaction is open while r is read. Nothing is kept when it fails (but
	// what a process that dies leaves, for the sweep).
	Stage(ctx context.Context, orgID int64, name, contentType string, r io.Reader, maxSize int64) (*Blob, error)
	// Open returns the bytes of a complete blob from offset on. ENOTFOUND
	// when missing or incomplete.
	Open(ctx context.Context, orgID, id, offset int64) (io.ReadCloser, *Blob, error)
	// Delete removes a blob. Deleting a missing blob is not an error.
	Delete(ctx context.Context, orgID, id int64) error
	// Sweep removes the orphaned blobs: incomplete ones created before
	// staleBefore, and those of jobs that ended or no longer exist. It
	// returns how many it removed.
	Sweep(ctx context.Context, staleBefore time.Time) (int, error)
}

// blobChunkSize is the size of one stored piece of a blob (before sealing).
const blobChunkSize = 1 << 20

type blobChunk struct {
	bun.BaseModel `bun:"table:blob_chunks"`

	BlobID int64  `bun:"blob_id,pk"`
	Seq    int64  `bun:"seq,pk"`
	Data   []byte `bun:"data"`
}

// DBBlobStore is the default BlobStore: blobs in the app database, in 1 MiB
// chunks, sealed with box. Without a box (tests, tools) chunks are stored as
// they are; the commands that serve refuse to start without a key.
type DBBlobStore struct {
	db  bun.IDB
	box *secret.Box
}

// NewDBBlobStore returns the blob store over db; it writes in the clear
// until Seal gives it a box.
func NewDBBlobStore(db bun.IDB) *DBBlobStore { return &DBBlobStore{db: db} }

// Seal makes the store seal what it writes with box and open what it reads
// with it.
func (s *DBBlobStore) Seal(box *secret.Box) { s.box = box }

// blobChunkAAD binds a sealed chunk to its organization, blob and index.
func blobChunkAAD(orgID, blobID, seq int64) string {
	return fmt.Sprintf("iam-blob:%d:%d:%d", orgID, blobID, seq)
}

// errBlobTooLarge is the refusal of a file over maxSize.
func errBlobTooLarge(maxSize int64) error {
	return &models.Error{Code: models.ETOOLARGE, Field: "file", Detail: fmt.Sprintf("the file is larger than %d bytes", maxSize)}
}

// writeChunks reads r into chunks of blob, each written by exec (a
// statement of the caller's transaction, or one of its own), and fills the
// blob's size and hash.
func (s *DBBlobStore) writeChunks(ctx context.Context, db bun.IDB, blob *Blob, r io.Reader, maxSize int64) error {
	// The chunk travels as a bound parameter (binary with pgx), not
	// formatted into the statement's text as bun would.
	insertChunk := sqldb.DialectOf(db).InsertBlobChunk()
	exec := func(seq int64, data []byte) error {
		var err error
		switch d := db.(type) {
		case bun.Tx:
			_, err = d.Tx.ExecContext(ctx, insertChunk, blob.ID, seq, data)
		case *bun.DB:
			_, err = d.DB.ExecContext(ctx, insertChunk, blob.ID, seq, data)
		default:
			_, err = db.ExecContext(ctx, insertChunk, blob.ID, seq, data)
		}
		return err
	}
	hash := sha256.New()
	buf := make([]byte, blobChunkSize)
	for seq := int64(0); ; seq++ {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			blob.Size += int64(n)
			if maxSize > 0 && blob.Size > maxSize {
				return errBlobTooLarge(maxSize)
			}
			hash.Write(buf[:n])
			data := buf[:n]
			if blob.Sealed {
				data = s.box.Seal(data, blobChunkAAD(blob.OrgID, blob.ID, seq))
			}
			// err, the read's, says below whether the blob ended.
			if execErr := exec(seq, data); execErr != nil {
				return fmt.Errorf("insert blob chunk: %w", execErr)
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
	return nil
}

func (s *DBBlobStore) newBlob(orgID int64, name, contentType string, complete bool) *Blob {
	return &Blob{ID: sqldb.NewID(), OrgID: orgID, Name: name, ContentType: contentType,
		CreatedAt: time.Now().UTC(), Complete: complete, Sealed: s.box != nil}
}

// Put implements BlobStore.
func (s *DBBlobStore) Put(ctx context.Context, orgID int64, name, contentType string, r io.Reader, maxSize int64) (*Blob, error) {
	return s.PutIn(ctx, s.db, orgID, name, contentType, r, maxSize)
}

// PutIn is Put inside db, which may be the caller's transaction.
func (s *DBBlobStore) PutIn(ctx context.Context, db bun.IDB, orgID int64, name, contentType string, r io.Reader, maxSize int64) (*Blob, error) {
	blob := s.newBlob(orgID, name, contentType, true)
	// Once: the upload is read as it is written.
	err := sqldb.InTxOnce(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(blob).Exec(ctx); err != nil {
			return fmt.Errorf("insert blob: %w", err)
		}
		if err := s.writeChunks(ctx, tx, blob, r, maxSize); err != nil {
			return err
		}
		_, err := tx.NewUpdate().Model(blob).Column("size", "sha256").WherePK().Exec(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return blob, nil
}

// Stage implements BlobStore.
func (s *DBBlobStore) Stage(ctx context.Context, orgID int64, name, contentType string, r io.Reader, maxSize int64) (*Blob, error) {
	blob := s.newBlob(orgID, name, contentType, false)
	if _, err := s.db.NewInsert().Model(blob).Exec(ctx); err != nil {
		return nil, fmt.Errorf("insert blob: %w", err)
	}
	if err := s.writeChunks(ctx, s.db, blob, r, maxSize); err != nil {
		if derr := s.Delete(context.WithoutCancel(ctx), orgID, blob.ID); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	return blob, nil
}

// complete marks a staged blob complete, with its size and hash, and ties it
// to its job, inside tx.
func (s *DBBlobStore) complete(ctx context.Context, tx bun.IDB, blob *Blob, jobID int64) error {
	blob.Complete, blob.JobID = true, &jobID
	res, err := tx.NewUpdate().Model(blob).Column("size", "sha256", "complete", "job_id").
		Where("id = ? AND org_id = ? AND NOT complete", blob.ID, blob.OrgID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("complete blob: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return errors.New("complete blob: the staged file is gone (swept?)")
	}
	return nil
}

// Open implements BlobStore. The reader fetches one chunk at a time.
func (s *DBBlobStore) Open(ctx context.Context, orgID, id, offset int64) (io.ReadCloser, *Blob, error) {
	blob := new(Blob)
	err := s.db.NewSelect().Model(blob).Where("org_id = ? AND id = ? AND complete", orgID, id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, models.NotFound("File", "the uploaded file does not exist")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("select blob: %w", err)
	}
	if offset < 0 || offset > blob.Size {
		return nil, nil, models.Invalid("offset", "is outside the file")
	}
	if blob.Sealed && s.box == nil {
		return nil, nil, models.Invalid("file", "the uploaded file is sealed and this process has no encryption key (IAM_ENCRYPTION_KEY)")
	}
	seq := offset / blobChunkSize
	return &blobReader{ctx: ctx, db: s.db, blob: blob, box: s.box, seq: seq, pos: seq * blobChunkSize, skip: offset % blobChunkSize}, blob, nil
}

// Delete implements BlobStore.
func (s *DBBlobStore) Delete(ctx context.Context, orgID, id int64) error {
	return s.DeleteIn(ctx, s.db, orgID, id)
}

// DeleteIn is Delete inside db, which may be the caller's transaction.
func (s *DBBlobStore) DeleteIn(ctx context.Context, db bun.IDB, orgID, id int64) error {
	return sqldb.InTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
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

// deleteJobBlobs removes the blobs uploaded for a job, inside db.
func deleteJobBlobs(ctx context.Context, db bun.IDB, jobID int64) error {
	ids := db.NewSelect().Model((*Blob)(nil)).Column("id").Where("job_id = ?", jobID)
	if _, err := db.NewDelete().Model((*blobChunk)(nil)).Where("blob_id IN (?)", ids).Exec(ctx); err != nil {
		return fmt.Errorf("delete the job's file: %w", err)
	}
	if _, err := db.NewDelete().Model((*Blob)(nil)).Where("job_id = ?", jobID).Exec(ctx); err != nil {
		return fmt.Errorf("delete the job's file: %w", err)
	}
	return nil
}

// Sweep implements BlobStore.
func (s *DBBlobStore) Sweep(ctx context.Context, staleBefore time.Time) (int, error) {
	var orphans []Blob
	err := s.db.NewSelect().Model(&orphans).Column("blob.id", "blob.org_id").
		Join("LEFT JOIN jobs AS j ON j.id = blob.job_id").
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("NOT blob.complete AND blob.created_at < ?", staleBefore.UTC()).
				WhereOr("blob.job_id IS NOT NULL AND (j.id IS NULL OR j.status IN (?))",
					bun.List([]JobStatus{JobCompleted, JobWarning, JobError}))
		}).
		Limit(1000).Scan(ctx)
	if err != nil {
		return 0, fmt.Errorf("find orphaned blobs: %w", err)
	}
	for _, b := range orphans {
		if err := s.Delete(ctx, b.OrgID, b.ID); err != nil {
			return 0, err
		}
	}
	return len(orphans), nil
}

// blobReader reads a blob chunk by chunk, opening sealed chunks, and checks
// that it read the whole blob.
type blobReader struct {
	ctx  context.Context
	db   bun.IDB
	blob *Blob
	box  *secret.Box
	seq  int64
	pos  int64 // plain offset of chunk seq
	skip int64
	cur  []byte
	done bool
}

func (r *blobReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.done {
			return 0, io.EOF
		}
		if r.pos >= r.blob.Size {
			r.done = true
			return 0, io.EOF
		}
		chunk := new(blobChunk)
		err := r.db.NewSelect().Model(chunk).Where("blob_id = ? AND seq = ?", r.blob.ID, r.seq).Scan(r.ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("read blob %d: chunk %d is missing", r.blob.ID, r.seq)
		}
		if err != nil {
			return 0, fmt.Errorf("read blob chunk: %w", err)
		}
		data := chunk.Data
		if r.blob.Sealed {
			if data, err = r.box.Open(data, blobChunkAAD(r.blob.OrgID, r.blob.ID, r.seq)); err != nil {
				return 0, fmt.Errorf("read blob %d: chunk %d: %w", r.blob.ID, r.seq, err)
			}
		}
		if int64(len(data)) != min(blobChunkSize, r.blob.Size-r.pos) {
			return 0, fmt.Errorf("read blob %d: chunk %d holds %d bytes, not what the blob's size says", r.blob.ID, r.seq, len(data))
		}
		r.seq++
		r.pos += int64(len(data))
		r.cur = data
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
