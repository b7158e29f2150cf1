package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"

	"iam/activities"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/secret/secrettest"
	"iam/models/sqldb"
	modelstore "iam/models/store"
)

// TestEnrollCSVProfile runs the CSV enrollment activities directly (no
// Temporal), chunk after chunk with the lookahead, and checks that every row
// is enrolled once, with one SUCCESS result each and the job's progress
// complete. In CI it runs 3,000 rows in chunks of 1,000 on both databases.
// For profiling, IAM_ENROLL_PROFILE_DSN names a database to run on instead
// (migrated first) with IAM_ENROLL_PROFILE_ROWS rows (100,000 by default) in
// chunks of IAM_ENROLL_PROFILE_CHUNK rows; the time of each step is logged.
func TestEnrollCSVProfile(t *testing.T) {
	dsn := os.Getenv("IAM_ENROLL_PROFILE_DSN")
	if dsn == "" {
		dbtest.Each(t, func(t *testing.T, db *bun.DB) { enrollCSVDirectly(t, db, 3000, 1000) })
		return
	}
	rows := envInt("IAM_ENROLL_PROFILE_ROWS", 100_000)
	chunk := envInt("IAM_ENROLL_PROFILE_CHUNK", enrollment.DefaultEnrollChunkRows)
	ctx := context.Background()
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := sqldb.MigrateUp(ctx, db); err != nil {
		t.Fatal(err)
	}
	enrollCSVDirectly(t, db, rows, chunk)
}

// enrollCSVDirectly seeds rows users and enrolls their SMS numbers from a CSV
// through the activities, chunk rows at a time.
func enrollCSVDirectly(t *testing.T, db *bun.DB, rows, chunk int) {
	ctx := context.Background()
	store := modelstore.NewStore(db)
	org := &identity.Organization{Name: "Profile"}
	if err := store.Orgs.Create(ctx, org); err != nil {
		t.Fatal(err)
	}
	configs, err := modelstore.NewStore(db).Factors.List(ctx, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	var sms int64
	for _, c := range configs {
		if c.Type == enrollment.FactorSMSOTP {
			sms = c.ID
		}
	}
	began := time.Now()
	now := time.Now().UTC()
	if sqldb.IsPostgres(db) {
		conn, cerr := db.DB.Conn(ctx)
		if cerr != nil {
			t.Fatal(cerr)
		}
		rerr := conn.Raw(func(dc any) error {
			i := 0
			_, copyErr := dc.(*stdlib.Conn).Conn().CopyFrom(ctx, pgx.Identifier{"users"}, []string{"id", "org_id", "email", "created_at", "updated_at"},
				pgx.CopyFromFunc(func() ([]any, error) {
					if i == rows {
						return nil, nil
					}
					i++
					return []any{sqldb.NewID(), org.ID, "user" + strconv.Itoa(i) + "@example.com", now, now}, nil
				}))
			return copyErr
		})
		if err = conn.Close(); err != nil {
			t.Fatal(err)
		}
		if rerr != nil {
			t.Fatal(rerr)
		}
	} else {
		tx, terr := db.BeginTx(ctx, nil)
		if terr != nil {
			t.Fatal(terr)
		}
		stmt, serr := tx.PrepareContext(ctx, "INSERT INTO users (id, org_id, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)")
		if serr != nil {
			t.Fatal(serr)
		}
		for i := 1; i <= rows; i++ {
			if _, err = stmt.ExecContext(ctx, sqldb.NewID(), org.ID, "user"+strconv.Itoa(i)+"@example.com", now, now); err != nil {
				t.Fatal(err)
			}
		}
		if err = tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// No ANALYZE: a job may start right after its users were loaded,
	// before the database has statistics of them.
	t.Logf("seeded %d users in %v", rows, time.Since(began).Round(time.Millisecond))

	var b bytes.Buffer
	b.WriteString("Primary Email,Mobile Number\n")
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&b, "user%d@example.com,+1415%07d\n", i, i)
	}
	header := len("Primary Email,Mobile Number\n")
	blob, err := store.Blobs.Put(ctx, org.ID, "users.csv", "text/csv", &b, 0)
	if err != nil {
		t.Fatal(err)
	}
	input := enrollment.EnrollCSVInput{BlobID: blob.ID, FileName: "users.csv", Encoding: "UTF-8", FactorConfigIDs: []int64{sms},
		Header: []string{"Primary Email", "Mobile Number"}, UserColumn: "Primary Email", DataOffset: int64(header), ChunkRows: chunk}
	job := &jobs.Job{OrgID: org.ID, Kind: "QuickEnrollmentCSV", Module: enrollment.EnrollmentModule, ActionName: enrollment.EnrollCSVAction}
	if job.Input, err = jsonOf(input); err != nil {
		t.Fatal(err)
	}
	if err = store.Jobs.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if _, err = store.Jobs.Start(ctx, org.ID, job.ID); err != nil {
		t.Fatal(err)
	}
	a := &activities.Enrollment{Store: store, Secrets: secrettest.Box}
	ref := jobs.JobRef{JobID: job.ID, OrgID: org.ID}

	began = time.Now()
	p, err := a.CountEnrollCSVRows(ctx, activities.EnrollCSVJob{Job: ref, Params: input})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("count: %d rows in %v", p.Total, time.Since(began).Round(time.Millisecond))
	steps := map[string]time.Duration{}
	activities.SetChunkSteps(func(step string, d time.Duration) { steps[step] += d })
	defer activities.SetChunkSteps(nil)
	began = time.Now()
	from := int64(1)
	for {
		res, rerr := a.EnrollCSVRows(ctx, activities.EnrollCSVChunk{Job: ref, Params: input, From: from, Before: p})
		if rerr != nil {
			t.Fatal(rerr)
		}
		p, from = res.Progress, res.Next
		if res.Done {
			break
		}
	}
	el := time.Since(began)
	t.Logf("chunks: %d rows in %v (%.0f rows/s): %+v", p.Processed, el.Round(time.Millisecond), float64(p.Processed)/el.Seconds(), p)
	for k, v := range steps {
		t.Logf("  %-10s %v", k, v.Round(time.Millisecond))
	}
	if want := (activities.Progress{Processed: int64(rows), Total: int64(rows), Success: int64(rows)}); p != want {
		t.Errorf("progress %+v, want %+v", p, want)
	}
	job, err = store.Jobs.Get(ctx, org.ID, job.ID)
	if err != nil || job.Processed != int64(rows) || job.SuccessCount != int64(rows) || job.ErrorCount != 0 {
		t.Errorf("job %+v (%v), want %d rows processed, all successful", job, err, rows)
	}
	results, err := store.Jobs.Results(ctx, job.ID, "", 0, rows+10)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != rows {
		t.Errorf("%d results, want %d", len(results), rows)
	}
	for i, r := range results {
		if r.Seq != int64(i+1) || r.Status != jobs.ResultSuccess {
			t.Fatalf("result %d: %+v, want SUCCESS of row %d", i, r, i+1)
		}
	}
	if n, err := db.NewSelect().Table("enrollments").Where("org_id = ? AND job_id = ?", org.ID, job.ID).Count(ctx); err != nil || n != int64(rows) {
		t.Errorf("%d enrollments (%v), want %d", n, err, rows)
	}
	if steps["prepare"] <= 0 || steps["apply"] <= 0 {
		t.Errorf("steps timed: %v, want prepare and apply", steps)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func jsonOf(v any) (json.RawMessage, error) { return json.Marshal(v) }
