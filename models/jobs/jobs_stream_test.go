package jobs_test

import (
	"fmt"
	"testing"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/jobs"
	"iam/models/modeltest"
	"iam/models/store"
)

// TestJobStore_States reads several jobs' stored state in one call, without
// their input; a deleted job is left out.
func TestJobStore_States(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := store.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		a, b, c := modeltest.NewJob(t, store, org), modeltest.NewJob(t, store, other), modeltest.NewJob(t, store, org)
		if _, err := store.Jobs.Start(ctx, org.ID, a.ID); err != nil {
			t.Fatal(err)
		}
		if err := store.Jobs.RecordChunk(ctx, org.ID, a.ID, nil, jobs.JobProgress{Processed: 2, Total: 3, Success: 2}); err != nil {
			t.Fatal(err)
		}
		if err := store.Jobs.Delete(ctx, org.ID, c.ID); err != nil {
			t.Fatal(err)
		}
		got, err := store.Jobs.States(ctx, []int64{a.ID, b.ID, c.ID})
		if err != nil {
			t.Fatal(err)
		}
		byID := map[int64]jobs.Job{}
		for _, j := range got {
			byID[j.ID] = j
		}
		if len(got) != 2 {
			t.Fatalf("States = %+v, want jobs a and b", got)
		}
		if j := byID[a.ID]; j.Status != jobs.JobRunning || j.Processed != 2 || j.Total != 3 || j.OrgID != org.ID || j.Input != nil || j.UpdatedAt.IsZero() {
			t.Errorf("job a = %+v", j)
		}
		if j := byID[b.ID]; j.Status != jobs.JobQueued || j.OrgID != other.ID {
			t.Errorf("job b = %+v", j)
		}
		if none, err := store.Jobs.States(ctx, nil); err != nil || none != nil {
			t.Errorf("States(nil) = %v, %v", none, err)
		}
	})
}

// TestJobStore_ResultsAfter pages through a job's results by row number,
// only that job's, however the pages fall.
func TestJobStore_ResultsAfter(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		job, neighbour := modeltest.NewJob(t, store, org), modeltest.NewJob(t, store, org)
		for _, j := range []*jobs.Job{job, neighbour} {
			if _, err := store.Jobs.Start(ctx, org.ID, j.ID); err != nil {
				t.Fatal(err)
			}
		}
		// Rows 1..7 and 10 (a gap), recorded out of order.
		rows := []int64{10, 3, 1, 2, 7, 4, 5, 6}
		results := make([]jobs.JobResult, len(rows))
		for i, seq := range rows {
			results[i] = jobs.JobResult{Seq: seq, Status: jobs.ResultSuccess}
		}
		if err := store.Jobs.RecordChunk(ctx, org.ID, job.ID, results, jobs.JobProgress{Processed: 8, Total: 8, Success: 8}); err != nil {
			t.Fatal(err)
		}
		if err := store.Jobs.RecordChunk(ctx, org.ID, neighbour.ID, []jobs.JobResult{{Seq: 8, Status: jobs.ResultError}}, jobs.JobProgress{Processed: 1}); err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{1, 3, 8, 100} {
			var seqs []int64
			for after := int64(0); ; {
				page, err := store.Jobs.ResultsAfter(ctx, job.ID, after, size)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > size {
					t.Fatalf("a page of %d holds %d", size, len(page))
				}
				for _, r := range page {
					seqs = append(seqs, r.Seq)
				}
				if len(page) < size {
					break
				}
				after = page[len(page)-1].Seq
			}
			if want := []int64{1, 2, 3, 4, 5, 6, 7, 10}; len(seqs) != len(want) || fmt.Sprint(seqs) != fmt.Sprint(want) {
				t.Errorf("pages of %d: rows %v, want %v", size, seqs, want)
			}
		}
	})
}
