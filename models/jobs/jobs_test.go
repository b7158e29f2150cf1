package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/jobs"
	"iam/models/modeltest"
	"iam/models/store"
)

func TestJobStore_Lifecycle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		job := modeltest.NewJob(t, store, org)

		got, err := store.Jobs.Get(ctx, org.ID, job.ID)
		if err != nil || got.Status != jobs.JobQueued || got.EndTime != nil {
			t.Fatalf("Get = %+v, %v; want QUEUED", got, err)
		}
		var input struct{ Items int }
		if err = json.Unmarshal(got.Input, &input); err != nil || input.Items != 3 {
			t.Errorf("input = %s, want the stored one", got.Input)
		}
		started, err := store.Jobs.Start(ctx, org.ID, job.ID)
		if err != nil || started.Status != jobs.JobRunning {
			t.Fatalf("Start = %+v, %v", started, err)
		}
		if again, startErr := store.Jobs.Start(ctx, org.ID, job.ID); startErr != nil || again.Status != jobs.JobRunning {
			t.Errorf("a second Start must change nothing: %+v, %v", again, startErr)
		}

		results := []jobs.JobResult{{Seq: 1, EntityID: "u1", Status: jobs.ResultSuccess}, {Seq: 2, Status: jobs.ResultError, Message: "bad"}}
		p := jobs.JobProgress{Processed: 2, Total: 3, Success: 1, Failed: 1}
		for i := 0; i < 2; i++ { // recording a chunk twice leaves the same state
			if err = store.Jobs.RecordChunk(ctx, org.ID, job.ID, results, p); err != nil {
				t.Fatal(err)
			}
		}
		rs, err := store.Jobs.Results(ctx, job.ID, "", 0, 10)
		if err != nil || len(rs) != 2 || rs[1].Message != "bad" {
			t.Fatalf("Results = %+v, %v", rs, err)
		}
		if errs, _ := store.Jobs.Results(ctx, job.ID, jobs.ResultError, 0, 10); len(errs) != 1 {
			t.Errorf("error results = %+v", errs)
		}

		final := jobs.JobProgress{Processed: 3, Total: 3, Success: 2, Failed: 1}
		if err := store.Jobs.Finish(ctx, org.ID, job.ID, jobs.JobWarning, "some failed", final); err != nil {
			t.Fatal(err)
		}
		got, _ = store.Jobs.Get(ctx, org.ID, job.ID)
		if got.Status != jobs.JobWarning || got.EndTime == nil || got.Progress() != final {
			t.Errorf("after Finish: %+v", got)
		}
		if err := store.Jobs.Finish(ctx, org.ID, job.ID, jobs.JobError, "late", final); err != nil {
			t.Errorf("finishing twice must be harmless: %v", err)
		}
		if got, _ = store.Jobs.Get(ctx, org.ID, job.ID); got.Status != jobs.JobWarning {
			t.Errorf("a second Finish changed the state to %s", got.Status)
		}
		if err := store.Jobs.RecordChunk(ctx, org.ID, job.ID, nil, final); models.ErrorCode(err) != models.ECONFLICT {
			t.Errorf("recording on a finished job: %v, want ECONFLICT", err)
		}
		if _, err := store.Jobs.Start(ctx, org.ID, job.ID); models.ErrorCode(err) != models.ECONFLICT {
			t.Errorf("starting a finished job: %v, want ECONFLICT", err)
		}
	})
}

func TestJobStore_TenancyAndDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		mine, theirs := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		job := modeltest.NewJob(t, store, mine)
		if _, err := store.Jobs.Get(ctx, theirs.ID, job.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("another org reads the job: %v", err)
		}
		if err := store.Jobs.Delete(ctx, theirs.ID, job.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("another org deletes the job: %v", err)
		}
		if _, err := store.Jobs.Start(ctx, mine.ID, job.ID); err != nil {
			t.Fatal(err)
		}
		if err := store.Jobs.RecordChunk(ctx, mine.ID, job.ID, []jobs.JobResult{{Seq: 1, Status: "SUCCESS"}}, jobs.JobProgress{Processed: 1}); err != nil {
			t.Fatal(err)
		}
		if err := store.Jobs.Delete(ctx, mine.ID, job.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Jobs.Get(ctx, mine.ID, job.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("deleted job still readable: %v", err)
		}
		if rs, _ := store.Jobs.Results(ctx, job.ID, "", 0, 10); len(rs) != 0 {
			t.Errorf("results outlive their job: %+v", rs)
		}
		err := store.Jobs.RecordChunk(ctx, mine.ID, job.ID, nil, jobs.JobProgress{})
		if e := (*models.Error)(nil); !errors.As(err, &e) || e.Title != "Job Not Found" {
			t.Errorf("writing to a deleted job: %v, want Job Not Found", err)
		}
	})
}

func TestJobStore_StalePagesThroughQueuedJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		var ids []int64
		for i := 0; i < 5; i++ {
			ids = append(ids, modeltest.NewJob(t, store, org).ID)
		}
		if _, err := store.Jobs.Start(ctx, org.ID, ids[2]); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Minute)
		first, err := store.Jobs.Stale(ctx, later, 0, 2)
		if err != nil || len(first) != 2 || first[0].ID != ids[0] || first[1].ID != ids[1] {
			t.Fatalf("first page = %v, %v", first, err)
		}
		rest, _ := store.Jobs.Stale(ctx, later, first[1].ID, 10)
		if len(rest) != 2 || rest[0].ID != ids[3] || rest[1].ID != ids[4] {
			t.Errorf("second page = %v; want the queued jobs after %d", rest, first[1].ID)
		}
		if none, _ := store.Jobs.Stale(ctx, time.Now().Add(-time.Minute), 0, 10); len(none) != 0 {
			t.Errorf("jobs newer than the grace time are not stale: %v", none)
		}
	})
}

func TestBlobStore_StreamsInChunksAndEnforcesTheLimit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		data := bytes.Repeat([]byte("0123456789abcdef"), 200_000) // 3.2 MB: four chunks
		blob, err := store.Blobs.Put(ctx, org.ID, "users.csv", "text/csv", bytes.NewReader(data), 10<<20)
		if err != nil {
			t.Fatal(err)
		}
		if blob.Size != int64(len(data)) || len(blob.SHA256) != 64 {
			t.Errorf("blob = %+v", blob)
		}
		for _, offset := range []int64{0, 1, 1 << 20, int64(len(data)) - 3, int64(len(data))} {
			r, _, err := store.Blobs.Open(ctx, org.ID, blob.ID, offset)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if _, err := got.ReadFrom(r); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), data[offset:]) {
				t.Errorf("read from %d: %d bytes, want %d", offset, got.Len(), len(data)-int(offset))
			}
		}
		if _, _, err := store.Blobs.Open(ctx, other.ID, blob.ID, 0); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("another org opens the blob: %v", err)
		}
		if _, err := store.Blobs.Put(ctx, org.ID, "big", "", bytes.NewReader(data), 1<<20); models.ErrorCode(err) != models.ETOOLARGE {
			t.Errorf("over the limit: %v, want ETOOLARGE", err)
		}
		var count int
		if err := db.NewSelect().Table("blobs").ColumnExpr("count(*)").Scan(ctx, &count); err != nil || count != 1 {
			t.Errorf("a refused upload left rows behind: %d blobs (%v)", count, err)
		}
		if err := store.Blobs.Delete(ctx, org.ID, blob.ID); err != nil {
			t.Fatal(err)
		}
		if err := db.NewSelect().Table("blob_chunks").ColumnExpr("count(*)").Scan(ctx, &count); err != nil || count != 0 {
			t.Errorf("chunks outlive their blob: %d (%v)", count, err)
		}
	})
}

func TestJobStore_CountByModuleStatus(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		a, b := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		modeltest.NewJob(t, store, a)
		modeltest.NewJob(t, store, b)
		running := modeltest.NewJob(t, store, b)
		if _, err := store.Jobs.Start(ctx, b.ID, running.ID); err != nil {
			t.Fatal(err)
		}
		got, err := store.Jobs.CountByModuleStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []jobs.JobCount{{Module: "System", Status: jobs.JobQueued, Count: 2}, {Module: "System", Status: jobs.JobRunning, Count: 1}}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("CountByModuleStatus = %+v, want %+v (every organization's jobs)", got, want)
		}
	})
}
