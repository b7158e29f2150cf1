package jobs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"text/template"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/jobs"
	"iam/models/modeltest"
	"iam/models/secret"
	"iam/models/sqldb"
	modelstore "iam/models/store"
)

func testBox(t *testing.T) *secret.Box {
	t.Helper()
	key := make([]byte, secret.KeySize)
	rand.Read(key)
	box, err := secret.NewBox(key)
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// A sealed blob's chunks hold no plaintext, read back whole from any
// offset, and refuse to open when moved, swapped, cut or read with another
// key; a staged blob stays unreadable until its job completes it.
func TestBlobs_SealedAtRest(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		box := testBox(t)
		store := modelstore.NewStore(db).SealBlobs(box)
		org := modeltest.NewOrg(t, store)
		line := "user@example.com,JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP\n"
		data := []byte(strings.Repeat(line, (3<<20)/len(line)+10)) // four chunks
		blob, err := store.Blobs.Put(ctx, org.ID, "users.csv", "text/csv", bytes.NewReader(data), 10<<20)
		if err != nil {
			t.Fatal(err)
		}
		var chunks [][]byte
		if err = db.NewSelect().Table("blob_chunks").Column("data").Where("blob_id = ?", blob.ID).Order("seq").Scan(ctx, &chunks); err != nil {
			t.Fatal(err)
		}
		if len(chunks) != 4 {
			t.Fatalf("%d chunks, want 4", len(chunks))
		}
		for i, c := range chunks {
			if bytes.Contains(c, []byte("JBSWY3DP")) || bytes.Contains(c, []byte("example.com")) {
				t.Errorf("chunk %d holds plaintext", i)
			}
		}
		readAll := func(s *modelstore.Store, offset int64) ([]byte, error) {
			r, _, openErr := s.Blobs.Open(ctx, org.ID, blob.ID, offset)
			if openErr != nil {
				return nil, openErr
			}
			defer func() { _ = r.Close() }() // only read: a close error tells the test nothing
			return io.ReadAll(r)
		}
		for _, off := range []int64{0, 5, 1 << 20, int64(len(data)) - 1, int64(len(data))} {
			got, readErr := readAll(store, off)
			if readErr != nil || !bytes.Equal(got, data[off:]) {
				t.Errorf("read from %d: %d bytes (%v)", off, len(got), readErr)
			}
		}
		if _, err = readAll(modelstore.NewStore(db).SealBlobs(testBox(t)), 0); err == nil {
			t.Error("the blob opens with another key")
		}
		if _, err = readAll(modelstore.NewStore(db), 0); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("a process without a key: %v, want EINVALID naming the key", err)
		}
		// Swap chunks 0 and 1: neither opens in the other's place.
		setChunk := func(seq int, data []byte) {
			t.Helper()
			if _, updErr := db.NewUpdate().Table("blob_chunks").Set("data = ?", data).Where("blob_id = ? AND seq = ?", blob.ID, seq).Exec(ctx); updErr != nil {
				t.Fatal(updErr)
			}
		}
		setChunk(0, chunks[1])
		setChunk(1, chunks[0])
		if _, err = readAll(store, 0); err == nil {
			t.Error("swapped chunks read without error")
		}
		setChunk(0, chunks[0])
		setChunk(1, chunks[1])
		if _, err = db.NewDelete().Table("blob_chunks").Where("blob_id = ? AND seq = 3", blob.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err = readAll(store, 0); err == nil {
			t.Error("a blob cut short reads without error")
		}

		staged, err := store.Blobs.Stage(ctx, org.ID, "users.csv", "text/csv", bytes.NewReader(data[:100]), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := store.Blobs.Open(ctx, org.ID, staged.ID, 0); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("an incomplete blob opens: %v", err)
		}
		if _, err := store.Blobs.Stage(ctx, org.ID, "big", "", bytes.NewReader(data), 1<<20); models.ErrorCode(err) != models.ETOOLARGE {
			t.Errorf("staging over the limit: %v, want ETOOLARGE", err)
		}
		var n int
		if err := db.NewSelect().Table("blobs").ColumnExpr("count(*)").Where("NOT complete").Scan(ctx, &n); err != nil || n != 1 {
			t.Errorf("%d incomplete blobs (%v), want only the staged one", n, err)
		}
	})
}

// CreateUploadJob writes the file and its job together: the job names the
// blob, the blob its job; when the job cannot be written nothing is kept.
func TestBlobs_CreateUploadJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := modelstore.NewStore(db).SealBlobs(testBox(t))
		org := modeltest.NewOrg(t, store)
		file := func() jobs.FileUpload {
			return jobs.FileUpload{Name: "u.csv", ContentType: "text/csv", Body: strings.NewReader("a,b\n1,2\n"), MaxSize: 1 << 20}
		}
		job := &jobs.Job{OrgID: org.ID, Kind: "K", Module: "M", ActionName: "A"}
		var blobID int64
		err := store.Jobs.CreateUploadJob(ctx, job, file(), func(b *jobs.Blob) (json.RawMessage, error) {
			blobID = b.ID
			return json.Marshal(map[string]string{"blob_id": models.FormatID(b.ID)})
		})
		if err != nil {
			t.Fatal(err)
		}
		var blob jobs.Blob
		if err = db.NewSelect().Model(&blob).Where("id = ?", blobID).Scan(ctx); err != nil || !blob.Complete || !blob.Sealed || blob.JobID == nil || *blob.JobID != job.ID || blob.Size != 8 {
			t.Fatalf("blob %+v (%v)", blob, err)
		}
		// A job that breaks a rule: no job, no blob.
		bad := &jobs.Job{OrgID: org.ID, Module: "M", ActionName: "A"}
		err = store.Jobs.CreateUploadJob(ctx, bad, file(), func(*jobs.Blob) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
		if models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("a job without kind: %v", err)
		}
		var blobs int
		if err := db.NewSelect().Table("blobs").ColumnExpr("count(*)").Scan(ctx, &blobs); err != nil || blobs != 1 {
			t.Errorf("%d blobs (%v), want only the first job's", blobs, err)
		}
		// Finishing the job deletes its file.
		if err := store.Jobs.Finish(ctx, org.ID, job.ID, jobs.JobCompleted, "done", jobs.JobProgress{}); err != nil {
			t.Fatal(err)
		}
		if err := db.NewSelect().Table("blob_chunks").ColumnExpr("count(*)").Scan(ctx, &blobs); err != nil || blobs != 0 {
			t.Errorf("%d chunks after the job ended (%v)", blobs, err)
		}
	})
}

// The migration that brought sealing ties the files of existing upload jobs
// to their jobs, so that the sweep removes them once their job has ended;
// the files of templates stay untied.
func TestBlobs_MigrationTiesOldUploadsToTheirJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := modelstore.NewStore(db)
		org := modeltest.NewOrg(t, store)
		upload, err := store.Blobs.Put(ctx, org.ID, "users.csv", "text/csv", strings.NewReader("a\n1\n"), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		logo, err := store.Blobs.Put(ctx, org.ID, "logo.png", "image/png", strings.NewReader("png"), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		input, _ := json.Marshal(map[string]string{"blob_id": models.FormatID(upload.ID)})
		job := &jobs.Job{OrgID: org.ID, Kind: "QuickEnrollmentCSV", Module: "QuickEnrollment", ActionName: "Upload CSV", Input: input}
		if err = store.Jobs.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
		// The statement of the migration that fills job_id, as migrate renders it.
		text, err := os.ReadFile("../sqldb/migrations/20261124000500_blob_lifecycle.tx.up.sql")
		if err != nil {
			t.Fatal(err)
		}
		tmpl := template.Must(template.New("m").Parse(string(text)))
		var sql strings.Builder
		if err := tmpl.Execute(&sql, map[string]bool{"Postgres": sqldb.IsPostgres(db)}); err != nil {
			t.Fatal(err)
		}
		stmts := strings.Split(sql.String(), "--bun:split")
		if _, err := db.ExecContext(ctx, stmts[len(stmts)-1]); err != nil {
			t.Fatal(err)
		}
		var blobs []jobs.Blob
		if err := db.NewSelect().Model(&blobs).Scan(ctx); err != nil {
			t.Fatal(err)
		}
		for _, b := range blobs {
			switch {
			case b.ID == upload.ID && (b.JobID == nil || *b.JobID != job.ID):
				t.Errorf("the upload's blob is tied to %v, want job %d", b.JobID, job.ID)
			case b.ID == logo.ID && b.JobID != nil:
				t.Errorf("the template's blob is tied to job %d", *b.JobID)
			}
		}
		if err := store.Jobs.Finish(ctx, org.ID, job.ID, jobs.JobCompleted, "", jobs.JobProgress{}); err != nil {
			t.Fatal(err)
		}
		if n, _ := db.NewSelect().Table("blobs").Count(ctx); n != 1 {
			t.Errorf("%d blobs after the job ended, want the template's only", n)
		}
	})
}
