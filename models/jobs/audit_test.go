package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/jobs"
	"iam/models/modeltest"
	"iam/models/sqldb"
	modelstore "iam/models/store"
)

// jobEvents returns the job events of the organization (job.*), oldest
// first, failing the test unless each names one job target.
func jobEvents(t *testing.T, db bun.IDB, orgID int64) []models.EventRecord {
	t.Helper()
	var out []models.EventRecord
	for _, ev := range modeltest.Events(t, db, orgID) {
		if !strings.HasPrefix(ev.EventType, "job.") {
			continue
		}
		if len(ev.Targets) != 1 || ev.Targets[0].Type != jobs.JobTargetType {
			t.Fatalf("%s targets = %+v, want one job", ev.EventType, ev.Targets)
		}
		out = append(out, ev)
	}
	return out
}

// wantJobEvents fails the test unless the organization's job events are
// want: each "type job-id result reason".
func wantJobEvents(t *testing.T, db bun.IDB, orgID int64, want ...string) {
	t.Helper()
	evs := jobEvents(t, db, orgID)
	got := make([]string, len(evs))
	for i, ev := range evs {
		got[i] = strings.Join([]string{ev.EventType, ev.Targets[0].ID, ev.Targets[0].DisplayName, ev.Outcome.Result, ev.Outcome.Reason}, "|")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("job events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func jobEvent(typ string, job *jobs.Job, result, reason string) string {
	return strings.Join([]string{typ, models.FormatID(job.ID), job.ActionName, result, reason}, "|")
}

// TestJobStore_AuditEvents: a job records its own lifecycle, each event
// once: job.queued when written, job.started when it runs,
// job.completed (WARNING in its reason) or job.failed (FAILURE) when it
// ends, job.deleted; its chunks, a second start and a second finish record
// nothing, and neither do refused writes.
func TestJobStore_AuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := modelstore.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		ok := models.ResultSuccess

		warned := modeltest.NewJob(t, store, org)
		wantJobEvents(t, db, org.ID, jobEvent(audit.JobQueued, warned, ok, ""))
		for range 2 {
			if _, err := store.Jobs.Start(ctx, org.ID, warned.ID); err != nil {
				t.Fatal(err)
			}
		}
		p := jobs.JobProgress{Processed: 2, Total: 2, Success: 1, Failed: 1}
		if err := store.Jobs.RecordChunk(ctx, org.ID, warned.ID, []jobs.JobResult{{Seq: 1, Status: jobs.ResultSuccess}, {Seq: 2, Status: jobs.ResultError}}, p); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := store.Jobs.Finish(ctx, org.ID, warned.ID, jobs.JobWarning, "some failed", p); err != nil {
				t.Fatal(err)
			}
		}
		wantJobEvents(t, db, org.ID,
			jobEvent(audit.JobQueued, warned, ok, ""),
			jobEvent(audit.JobStarted, warned, ok, ""),
			jobEvent(audit.JobCompleted, warned, ok, "WARNING: some failed"))

		failed := modeltest.NewJob(t, store, org)
		if err := store.Jobs.Finish(ctx, org.ID, failed.ID, jobs.JobError, "the file is not a CSV", jobs.JobProgress{}); err != nil {
			t.Fatal(err)
		}
		done := modeltest.NewJob(t, store, org)
		if _, err := store.Jobs.Start(ctx, org.ID, done.ID); err != nil {
			t.Fatal(err)
		}
		if err := store.Jobs.Finish(ctx, org.ID, done.ID, jobs.JobCompleted, "all done", jobs.JobProgress{}); err != nil {
			t.Fatal(err)
		}
		// Refused: another organization's job, a state that does not end
		// a job, a missing job.
		if err := store.Jobs.Delete(ctx, other.ID, done.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("delete from another organization = %v", err)
		}
		if err := store.Jobs.Finish(ctx, org.ID, done.ID, jobs.JobRunning, "", jobs.JobProgress{}); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("finish RUNNING = %v", err)
		}
		if err := store.Jobs.Finish(ctx, org.ID, 12345, jobs.JobCompleted, "", jobs.JobProgress{}); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("finish a missing job = %v", err)
		}
		if err := store.Jobs.Create(ctx, &jobs.Job{OrgID: org.ID, Module: "M", ActionName: "A"}); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("a job without kind = %v", err)
		}
		if err := store.Jobs.Delete(ctx, org.ID, done.ID); err != nil {
			t.Fatal(err)
		}
		if err := store.Jobs.Delete(ctx, org.ID, done.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("second delete = %v", err)
		}
		wantJobEvents(t, db, org.ID,
			jobEvent(audit.JobQueued, warned, ok, ""),
			jobEvent(audit.JobStarted, warned, ok, ""),
			jobEvent(audit.JobCompleted, warned, ok, "WARNING: some failed"),
			jobEvent(audit.JobQueued, failed, ok, ""),
			jobEvent(audit.JobFailed, failed, models.ResultFailure, "the file is not a CSV"),
			jobEvent(audit.JobQueued, done, ok, ""),
			jobEvent(audit.JobStarted, done, ok, ""),
			jobEvent(audit.JobCompleted, done, ok, ""),
			jobEvent(audit.JobDeleted, done, ok, ""))
		wantJobEvents(t, db, other.ID)
	})
}

// TestJobStore_QueuedOnEveryPath: every way a job is written records
// job.queued once: Create, CreateUploadJob, InsertJob inside the caller's
// transaction and on the bare database; a job rolled back (its
// idempotency claim lost, its upload refused) leaves no event.
func TestJobStore_QueuedOnEveryPath(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := modelstore.NewStore(db).SealBlobs(testBox(t))
		org := modeltest.NewOrg(t, store)
		ok := models.ResultSuccess
		newJob := func(action string) *jobs.Job {
			return &jobs.Job{OrgID: org.ID, Kind: "K", Module: "M", ActionName: action}
		}
		file := func() jobs.FileUpload {
			return jobs.FileUpload{Name: "u.csv", ContentType: "text/csv", Body: strings.NewReader("a\n1\n"), MaxSize: 1 << 20}
		}
		input := func(*jobs.Blob) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }

		upload := newJob("Upload")
		if err := store.Jobs.CreateUploadJob(ctx, upload, file(), input); err != nil {
			t.Fatal(err)
		}
		bare := newJob("Bare")
		if err := jobs.InsertJob(ctx, db, bare); err != nil {
			t.Fatal(err)
		}
		inTx := newJob("In a transaction")
		err := sqldb.InTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
			return jobs.InsertJob(ctx, tx, inTx)
		})
		if err != nil {
			t.Fatal(err)
		}
		// Refused: an upload whose input fails, a job whose claim is lost.
		refused := newJob("Refused")
		if err := store.Jobs.CreateUploadJobThen(ctx, refused, file(), input, func(context.Context, bun.Tx) error {
			return models.Invalid("x", "refused")
		}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("refused upload = %v", err)
		}
		k := jobs.IdemKey{OrgID: org.ID, ClientID: "cli", Key: "k"}
		if _, reserved, err := store.Idempotency.Reserve(ctx, k, "POST /x", "mine", time.Minute, time.Hour); err != nil || !reserved {
			t.Fatal(reserved, err)
		}
		lost := newJob("Lost")
		if err := store.Jobs.Create(jobs.WithIdempotencyClaim(ctx, &jobs.IdempotencyClaim{Key: k, Token: "not mine"}), lost); err == nil {
			t.Fatal("a job under a lost claim was written")
		}
		wantJobEvents(t, db, org.ID,
			jobEvent(audit.JobQueued, upload, ok, ""),
			jobEvent(audit.JobQueued, bare, ok, ""),
			jobEvent(audit.JobQueued, inTx, ok, ""))
	})
}
