package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/jobs"
	"iam/models/modeltest"
	"iam/models/store"
)

func jobCount(t *testing.T, db *bun.DB, orgID int64) int64 {
	t.Helper()
	n, err := db.NewSelect().Table("jobs").Where("org_id = ?", orgID).Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestIdempotency_ReserveCompleteReplay: a key is reserved once; a second
// reservation sees it in flight, then answered; the answer reads back whole.
func TestIdempotency_ReserveCompleteReplay(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		k := jobs.IdemKey{OrgID: org.ID, ClientID: "cli", Key: "k-1"}
		rec, ok, err := store.Idempotency.Reserve(ctx, k, "POST /x", "t1", time.Minute, time.Hour)
		if err != nil || !ok || rec.Token != "t1" {
			t.Fatalf("Reserve = %+v, %v, %v; want reserved", rec, ok, err)
		}
		rec, ok, err = store.Idempotency.Reserve(ctx, k, "POST /x", "t2", time.Minute, time.Hour)
		if err != nil || ok || !rec.InFlight() || rec.Token != "t1" {
			t.Fatalf("second Reserve = %+v, %v, %v; want the first in flight", rec, ok, err)
		}
		// Another client's or organization's key of the same text is its own.
		other := k
		other.ClientID = "cli-2"
		if _, ok, err = store.Idempotency.Reserve(ctx, other, "POST /x", "t3", time.Minute, time.Hour); err != nil || !ok {
			t.Fatalf("another client's key: %v, %v", ok, err)
		}
		if ok, err = store.Idempotency.Renew(ctx, k, "t2", time.Minute); err != nil || ok {
			t.Errorf("Renew by a non-owner = %v, %v; want false", ok, err)
		}
		if ok, err = store.Idempotency.Complete(ctx, k, "t2", jobs.IdempotentAnswer{Status: 202}); err != nil || ok {
			t.Errorf("Complete by a non-owner = %v, %v; want false", ok, err)
		}
		ans := jobs.IdempotentAnswer{Fingerprint: "fp", Status: 202, ContentType: "application/json", Location: "/api/v1/jobs/1", Body: []byte(`{"a":1}`)}
		if ok, err = store.Idempotency.Complete(ctx, k, "t1", ans); err != nil || !ok {
			t.Fatalf("Complete = %v, %v", ok, err)
		}
		rec, ok, err = store.Idempotency.Reserve(ctx, k, "POST /x", "t4", time.Minute, time.Hour)
		if err != nil || ok || rec.InFlight() || rec.Status != 202 || rec.Fingerprint != "fp" ||
			rec.Location != ans.Location || rec.ContentType != ans.ContentType || string(rec.Body) != `{"a":1}` {
			t.Fatalf("Reserve after the answer = %+v, %v, %v; want the answer", rec, ok, err)
		}
		if _, err := store.Idempotency.Release(ctx, k, "t1"); err != nil {
			t.Fatal(err)
		}
		if got, err := store.Idempotency.Get(ctx, k); err != nil || got.Status != 202 {
			t.Errorf("Release must not drop an answered key: %+v, %v", got, err)
		}
		if _, _, err := store.Idempotency.Reserve(ctx, jobs.IdemKey{OrgID: org.ID, ClientID: "cli", Key: strings.Repeat("k", jobs.MaxIdempotencyKeyLen+1)},
			"POST /x", "t", time.Minute, time.Hour); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("an over-long key: %v, want EINVALID", err)
		}
	})
}

// TestIdempotency_JobClaimsKeyInItsTransaction: a job written under a claim
// records itself on the key in its own transaction; a claim that lost its
// key (taken over after its lease ran out) rolls the job back; an abandoned
// key with a job is never taken over.
func TestIdempotency_JobClaimsKeyInItsTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		job := func(ctx context.Context) (*jobs.Job, error) {
			j := &jobs.Job{OrgID: org.ID, Kind: "Diagnostic", Module: "System", ActionName: "Diagnostic"}
			return j, store.Jobs.Create(ctx, j)
		}

		// Abandoned without a job (lease out): the next request takes it
		// over, and the stalled first owner's job is refused.
		k := jobs.IdemKey{OrgID: org.ID, ClientID: "cli", Key: "takeover"}
		if _, ok, err := store.Idempotency.Reserve(ctx, k, "POST /x", "old", -time.Second, time.Hour); err != nil || !ok {
			t.Fatalf("Reserve: %v, %v", ok, err)
		}
		rec, ok, err := store.Idempotency.Reserve(ctx, k, "POST /x", "new", time.Minute, time.Hour)
		if err != nil || !ok || rec.Token != "new" {
			t.Fatalf("take over = %+v, %v, %v", rec, ok, err)
		}
		before := jobCount(t, db, org.ID)
		_, err = job(jobs.WithIdempotencyClaim(ctx, &jobs.IdempotencyClaim{Key: k, Token: "old"}))
		if !errors.Is(err, jobs.ErrIdempotencyClaimLost) {
			t.Fatalf("job under a lost claim: %v, want ErrIdempotencyClaimLost", err)
		}
		if n := jobCount(t, db, org.ID); n != before {
			t.Fatalf("the refused job was written: %d jobs, want %d", n, before)
		}
		j, err := job(jobs.WithIdempotencyClaim(ctx, &jobs.IdempotencyClaim{Key: k, Token: "new"}))
		if err != nil {
			t.Fatal(err)
		}
		got, err := store.Idempotency.Get(ctx, k)
		if err != nil || got.JobID == nil || *got.JobID != j.ID {
			t.Fatalf("key after the job = %+v, %v; want job %d", got, err, j.ID)
		}
		// One request, one job: a second job under the same claim is refused.
		if _, err = job(jobs.WithIdempotencyClaim(ctx, &jobs.IdempotencyClaim{Key: k, Token: "new"})); !errors.Is(err, jobs.ErrIdempotencyClaimLost) {
			t.Errorf("a second job under one claim: %v", err)
		}

		// Abandoned after its job committed (the process died before its
		// answer): never taken over, and Release keeps it.
		k2 := jobs.IdemKey{OrgID: org.ID, ClientID: "cli", Key: "died-after-commit"}
		if _, ok, err = store.Idempotency.Reserve(ctx, k2, "POST /x", "dead", -time.Second, time.Hour); err != nil || !ok {
			t.Fatal(ok, err)
		}
		j2, err := job(jobs.WithIdempotencyClaim(ctx, &jobs.IdempotencyClaim{Key: k2, Token: "dead"}))
		if err != nil {
			t.Fatal(err)
		}
		rec, ok, err = store.Idempotency.Reserve(ctx, k2, "POST /x", "retry", time.Minute, time.Hour)
		if err != nil || ok || rec.JobID == nil || *rec.JobID != j2.ID || !rec.InFlight() {
			t.Fatalf("retry of a key whose job committed = %+v, %v, %v; want its job, not reserved", rec, ok, err)
		}
		if kept, err := store.Idempotency.Release(ctx, k2, "dead"); err != nil || kept == nil || *kept.JobID != j2.ID {
			t.Errorf("Release of a key with a job = %+v, %v; want it kept", kept, err)
		}
	})
}

// TestIdempotency_ExpiryAndSweep: an expired key is free again, and Sweep
// removes expired records only.
func TestIdempotency_ExpiryAndSweep(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		old := jobs.IdemKey{OrgID: org.ID, ClientID: "cli", Key: "old"}
		live := jobs.IdemKey{OrgID: org.ID, ClientID: "cli", Key: "live"}
		if _, ok, err := store.Idempotency.Reserve(ctx, old, "POST /x", "t1", time.Minute, -time.Second); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if _, ok, err := store.Idempotency.Reserve(ctx, live, "POST /x", "t2", time.Minute, time.Hour); err != nil || !ok {
			t.Fatal(ok, err)
		}
		n, err := store.Idempotency.Sweep(ctx, time.Now())
		if err != nil || n != 1 {
			t.Fatalf("Sweep = %d, %v; want 1", n, err)
		}
		if _, err := store.Idempotency.Get(ctx, old); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("expired key after the sweep: %v", err)
		}
		if _, err := store.Idempotency.Get(ctx, live); err != nil {
			t.Errorf("live key swept: %v", err)
		}
		// Expired but not swept yet: reserved afresh.
		if _, ok, err := store.Idempotency.Reserve(ctx, old, "POST /x", "t3", time.Minute, -time.Second); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if rec, ok, err := store.Idempotency.Reserve(ctx, old, "POST /x", "t4", time.Minute, time.Hour); err != nil || !ok || rec.Token != "t4" {
			t.Errorf("Reserve of an expired key = %+v, %v, %v; want reserved afresh", rec, ok, err)
		}
	})
}
