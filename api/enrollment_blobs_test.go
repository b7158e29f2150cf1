package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/api/jobrun"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/jobs"
	"iam/models/sqldb"
)

// findInDatabase returns "table.column" of every value, in every column of
// every table, that holds needle (as text or bytes).
func findInDatabase(t testing.TB, db *bun.DB, needle string) []string {
	t.Helper()
	ctx := context.Background()
	var tables []string
	q := "SELECT name FROM sqlite_master WHERE type = 'table'"
	if sqldb.IsPostgres(db) {
		q = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
	}
	if err := db.NewRaw(q).Scan(ctx, &tables); err != nil {
		t.Fatalf("list tables: %v", err)
	}
	if len(tables) < 10 {
		t.Fatalf("found only tables %v", tables)
	}
	var found []string
	for _, table := range tables {
		rows, err := db.QueryContext(ctx, `SELECT * FROM "`+table+`"`)
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("scan %s: %v", table, err)
			}
			for i, v := range vals {
				var text []byte
				switch v := v.(type) {
				case []byte:
					text = v
				case string:
					text = []byte(v)
				default:
					text = fmt.Appendf(nil, "%v", v)
				}
				if bytes.Contains(text, []byte(needle)) {
					found = append(found, table+"."+cols[i])
				}
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return found
}

// After a TOTP enrollment, no row of the database holds the secret in the
// clear: the uploaded file was sealed while it existed and is deleted when
// the job ends, the enrollment's secret is sealed, and no result repeats it.
func TestEnrollment_NoSecretInTheClearAfterTOTPEnrollment(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		seedUsers(t, db, env.Org, 3)
		ids := factorIDs(t, env, env.Org)
		tok := env.Token(env.Org, "svc.quick_enrollment.CREATE", "svc.job.READ")
		const other = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
		csv := "Primary Email,TOTP Secret\n" +
			"user1@example.com," + totpSecret + "\n" +
			"user2@example.com," + strings.ToLower(other) + "\n" +
			"nobody@example.com," + totpSecret + "\n" // fails: unknown user

		// While the job waits in the queue, the file is stored sealed.
		queued := apitest.New(t, db, apitest.Options{})
		qtok := queued.Token(queued.Org, "svc.quick_enrollment.CREATE")
		qids := factorIDs(t, queued, queued.Org)
		uploadCSV(t, queued, qtok, [][2]string{{"factor_configs", qids[enrollment.FactorTOTP]}}, csv)
		if n, _ := db.NewSelect().Table("blob_chunks").Count(context.Background()); n == 0 {
			t.Fatal("the queued job's file is not stored")
		}
		if where := findInDatabase(t, db, totpSecret); len(where) > 0 {
			t.Errorf("a queued upload's secret is in the clear in %v", where)
		}

		jobID := uploadCSV(t, env, tok, [][2]string{{"factor_configs", ids[enrollment.FactorTOTP]}}, csv)
		job := env.WaitJob(env.Org, jobID, 2*time.Minute, finished)
		if job.Status != jobs.JobWarning || job.SuccessCount != 2 || job.ErrorCount != 1 {
			t.Fatalf("job ended %s, %d ok %d failed; want WARNING, 2 ok, 1 failed", job.Status, job.SuccessCount, job.ErrorCount)
		}
		for _, secret := range []string{totpSecret, other, strings.ToLower(other)} {
			if where := findInDatabase(t, db, secret); len(where) > 0 {
				t.Errorf("secret %s is in the clear in %v", secret, where)
			}
		}
		var left int
		if err := db.NewSelect().Table("blobs").ColumnExpr("count(*)").Where("job_id = ?", jobID).Scan(context.Background(), &left); err != nil || left != 0 {
			t.Errorf("the ended job's file is still stored (%d blobs, %v)", left, err)
		}
	})
}

// DELETE /jobs/{id} deletes the job's file with it.
func TestEnrollment_DeletingTheJobDeletesItsFile(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		queue := apitest.New(t, db, apitest.Options{}) // no Temporal: the job stays QUEUED
		ids := factorIDs(t, queue, queue.Org)
		tok := queue.Token(queue.Org, "svc.quick_enrollment.CREATE", "svc.job.DELETE", "svc.job.READ")
		jobID := uploadCSV(t, queue, tok, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}}, "Primary Email,Email Address\nu@x.io,a@x.io\n")
		if n, _ := db.NewSelect().Table("blobs").Where("job_id = ?", jobID).Count(context.Background()); n != 1 {
			t.Fatalf("%d blobs for the job, want 1", n)
		}
		env := apitest.New(t, db, apitest.Options{Temporal: true}) // DELETE cancels the workflow
		resp := env.Do(apitest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/v1/jobs/%d", jobID), Token: env.Token(queue.Org, "svc.job.DELETE")})
		if resp.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", resp.Status, resp.Body)
		}
		assertNothingStored(t, db)
	})
}

// The sweep removes what no job needs: an upload that never completed once
// it is older than the grace, and the file of a job that ended or vanished;
// it leaves a job's file in use and a template's.
func TestEnrollment_SweepRemovesOrphanedFiles(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		env := apitest.New(t, db, apitest.Options{})
		ids := factorIDs(t, env, env.Org)
		tok := env.Token(env.Org, "svc.quick_enrollment.CREATE")
		csv := "Primary Email,Email Address\nu@x.io,a@x.io\n"
		live := uploadCSV(t, env, tok, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}}, csv)
		ended := uploadCSV(t, env, tok, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}}, csv)
		if _, err := db.NewUpdate().Table("jobs").Set("status = ?", jobs.JobCompleted).Where("id = ?", ended).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		gone := uploadCSV(t, env, tok, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}}, csv)
		if _, err := db.NewDelete().Table("jobs").Where("id = ?", gone).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		// A process died while it wrote an upload: an incomplete blob.
		stale, err := env.Store.Blobs.Stage(ctx, env.Org.ID, "dead.csv", "text/csv", strings.NewReader(csv), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := env.Store.Blobs.Stage(ctx, env.Org.ID, "busy.csv", "text/csv", strings.NewReader(csv), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if _, err = db.NewUpdate().Table("blobs").Set("created_at = ?", time.Now().UTC().Add(-2*time.Hour)).Where("id = ?", stale.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		template, err := env.Store.Blobs.Put(ctx, env.Org.ID, "logo.png", "image/png", strings.NewReader("png"), 1<<20)
		if err != nil {
			t.Fatal(err)
		}

		rec := &jobrun.Reconciler{Launcher: env.Jobs, UploadGrace: time.Hour}
		n, err := rec.Sweep(ctx)
		if err != nil || n != 3 {
			t.Fatalf("sweep removed %d (%v), want 3", n, err)
		}
		var left []jobs.Blob
		if err := db.NewSelect().Model(&left).Order("created_at").Scan(ctx); err != nil {
			t.Fatal(err)
		}
		want := map[int64]bool{fresh.ID: true, template.ID: true}
		for _, b := range left {
			if b.JobID != nil && *b.JobID == live {
				want[b.ID] = true
			}
			if !want[b.ID] {
				t.Errorf("blob %s (job %v, complete %v) survived the sweep", b.Name, b.JobID, b.Complete)
			}
		}
		if len(left) != 3 {
			t.Errorf("%d blobs left, want the live job's, the busy upload's and the template's", len(left))
		}
		var chunks int
		if err := db.NewSelect().Table("blob_chunks").ColumnExpr("count(*)").Scan(ctx, &chunks); err != nil {
			t.Fatal(err)
		}
		if chunks != 3 {
			t.Errorf("%d chunks left, want 3", chunks)
		}
	})
}
