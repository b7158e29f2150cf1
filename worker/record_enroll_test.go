//go:build record

package worker_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models/csvimport"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/jobs"
	"iam/models/sqldb"
	"iam/workflows"
)

type replayUser struct {
	bun.BaseModel `bun:"table:users"`

	ID        int64     `bun:"id,pk"`
	OrgID     int64     `bun:"org_id"`
	Email     string    `bun:"email"`
	CreatedAt time.Time `bun:"created_at"`
	UpdatedAt time.Time `bun:"updated_at"`
}

// recordEnroll runs a CSV job (three chunks, some rows failing) and a
// smart-card job (every entry failing) and writes their histories.
func recordEnroll(t *testing.T) {
	ctx := context.Background()
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	now := time.Now().UTC()
	for i := 1; i <= 20; i++ {
		u := &replayUser{ID: sqldb.NewID(), OrgID: env.Org.ID, Email: fmt.Sprintf("user%d@example.com", i), CreatedAt: now, UpdatedAt: now}
		if _, err := env.DB.NewInsert().Model(u).Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	configs, err := env.Store.Factors.List(ctx, env.Org.ID)
	if err != nil {
		t.Fatal(err)
	}
	var csv strings.Builder
	csv.WriteString("Primary Email,Mobile Number\n")
	for i := 1; i <= 25; i++ {
		fmt.Fprintf(&csv, "user%d@example.com,+1415555%04d\n", i, i)
	}
	enc, _ := csvimport.Lookup("UTF-8")
	ins, problems := csvimport.Inspect([]byte(csv.String()), true, enc)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	csvInput := enrollment.EnrollCSVInput{Encoding: ins.Encoding.Name, FactorConfigIDs: []int64{configs[1].ID},
		Header: ins.Header, UserColumn: enrollment.ColumnPrimaryEmail, DataOffset: ins.DataOffset, ChunkRows: 10}
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	for _, name := range []string{"user1@example.com.cer", "../up.cer", "notes.txt"} {
		w, _ := zw.Create(name)
		w.Write([]byte("not a certificate"))
	}
	zw.Close()
	cardInput := enrollment.EnrollSmartCardsInput{FactorConfigIDs: []int64{configs[3].ID}, FilenamePattern: enrollment.KeyPrimaryEmail, Entries: 3, ChunkRows: 2}

	for i, job := range []struct {
		kind, action string
		data         []byte
		set          func(blobID int64) any
	}{
		{workflows.EnrollCSVWorkflowName, enrollment.EnrollCSVAction, []byte(csv.String()), func(id int64) any { csvInput.BlobID = id; return csvInput }},
		{workflows.EnrollSmartCardsWorkflowName, enrollment.EnrollSmartCardsAction, zipped.Bytes(), func(id int64) any { cardInput.BlobID = id; return cardInput }},
	} {
		row := &jobs.Job{OrgID: env.Org.ID, Kind: job.kind, Module: enrollment.EnrollmentModule, ActionName: job.action}
		err := env.Store.Jobs.CreateUploadJob(ctx, row, jobs.FileUpload{Name: "f", Body: bytes.NewReader(job.data)},
			func(blob *jobs.Blob) (json.RawMessage, error) { return json.Marshal(job.set(blob.ID)) })
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Jobs.Launch(ctx, row); err != nil {
			t.Fatal(err)
		}
		done := env.WaitJob(env.Org, row.ID, time.Minute, func(j *jobs.Job) bool { return j.Status.Finished() })
		t.Logf("%s ended %s", job.kind, done.Status)
		run := env.Temporal.GetWorkflow(ctx, row.WorkflowID(), "")
		if err := run.Get(ctx, nil); err != nil {
			t.Fatal(err)
		}
		writeHistory(t, env.Temporal, row.WorkflowID(), filepath.Join("testdata", enrollHistories[i]))
	}
}
