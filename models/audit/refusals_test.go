package audit_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
)

// countEvents counts the organization's audit events.
func countEvents(t *testing.T, db *bun.DB, org int64) int {
	t.Helper()
	n, err := db.NewSelect().Table("audit_events").Where("org_id = ?", org).Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func denied(org int64) models.AuditEvent {
	return models.AuditEvent{OrgID: org, Type: audit.AccessDenied, Reason: "the token holds none of the scopes svc.user.READ",
		Targets: []models.EventTarget{{Type: "route", ID: "GET /api/v1/users", DisplayName: "GET /api/v1/users"}}}
}

// TestRefusals_RateBound: a flood of 10,000 refusals of one organization
// writes at most the burst plus the rate (a second's worth), counts the
// rest as dropped, and leaves another organization's bucket alone; each
// refusal written is DENIED (or FAILURE) with the context's origin.
func TestRefusals_RateBound(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := models.WithOrigin(context.Background(), models.Origin{
			Actor: models.Actor{Type: models.ActorUser, ID: "7", DisplayName: "Ann"}, RequestID: "req-1", IPAddress: "192.0.2.1"})
		const rate, burst, flood = 10, 100, 10_000
		r := audit.NewRefusals(rate, burst)
		now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
		r.SetClock(func() time.Time { return now })

		for range flood {
			if err := r.Record(ctx, db, denied(1)); err != nil {
				t.Fatal(err)
			}
		}
		if n := countEvents(t, db, 1); n != burst {
			t.Fatalf("a flood at one instant wrote %d refusals, want the burst (%d)", n, burst)
		}
		if d := r.Dropped(); d != flood-burst {
			t.Errorf("dropped %d, want %d", d, flood-burst)
		}
		now = now.Add(time.Second)
		for range flood {
			if err := r.Record(ctx, db, denied(1)); err != nil {
				t.Fatal(err)
			}
		}
		if n := countEvents(t, db, 1); n != burst+rate {
			t.Errorf("a second later another flood: %d refusals in all, want burst+rate (%d)", n, burst+rate)
		}
		if d := r.Dropped(); d != 2*flood-burst-rate {
			t.Errorf("dropped %d, want %d", d, 2*flood-burst-rate)
		}
		// Another organization has a bucket of its own.
		if err := r.Record(ctx, db, models.AuditEvent{OrgID: 2, Type: audit.OAuthSigninFailed, Result: models.ResultFailure, Reason: "wrong password"}); err != nil {
			t.Fatal(err)
		}
		if n := countEvents(t, db, 2); n != 1 {
			t.Errorf("the other organization has %d refusals, want 1", n)
		}

		evs, _, err := audit.NewEventStore(db).List(ctx, 1, audit.Query{Limit: 1})
		if err != nil || len(evs) != 1 {
			t.Fatalf("List = %v, %v", evs, err)
		}
		var ev models.EventRecord
		if err := json.Unmarshal(evs[0], &ev); err != nil {
			t.Fatal(err)
		}
		if ev.EventType != audit.AccessDenied || ev.Outcome.Result != models.ResultDenied || ev.Actor.ID != "7" ||
			ev.RequestID != "req-1" || ev.Client.IPAddress != "192.0.2.1" || len(ev.Targets) != 1 {
			t.Errorf("refusal = %+v", ev)
		}

		// Not a refusal, or of no organization: refused.
		if err := r.Record(ctx, db, models.AuditEvent{OrgID: 3, Type: audit.AccessDenied, Result: models.ResultSuccess}); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("a SUCCESS refusal = %v, want EINVALID", err)
		}
		if err := r.Record(ctx, db, models.AuditEvent{Type: audit.AccessDenied}); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("a refusal of no organization = %v, want EINVALID", err)
		}

		// On the real clock a flood writes at most the burst plus the rate
		// of the time it took.
		wall := audit.NewRefusals(rate, burst)
		start := time.Now()
		for range flood {
			if err := wall.Record(ctx, db, denied(4)); err != nil {
				t.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		limit := burst + int(float64(rate)*elapsed.Seconds()) + 1
		if n := countEvents(t, db, 4); n < burst || n > limit {
			t.Errorf("a flood of %d in %v wrote %d refusals, want between %d and %d", flood, elapsed, n, burst, limit)
		}
		if wall.Dropped()+int64(countEvents(t, db, 4)) != flood {
			t.Errorf("written %d + dropped %d != %d", countEvents(t, db, 4), wall.Dropped(), flood)
		}
	})
}
