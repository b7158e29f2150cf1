package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api"
	"iam/api/apitest"
	"iam/api/auth"
	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/modeltest"
	"iam/models/sqldb"
)

// TestAuth_AccessDeniedIsRecorded: a token without the scopes a route needs
// gets 403 and records access.denied (DENIED) in its organization: the
// token's user its actor, the route its target, the scopes it needed its
// reason, never the token. A 401 records nothing.
func TestAuth_AccessDeniedIsRecorded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		org := env.Org.ID
		userID := sqldb.NewID()
		narrow := env.Tokens.Mint(auth.Principal{UserID: userID, OrgID: org, Name: "Narrow Nora", Scopes: []string{"svc.job.READ"}})

		if r := env.Get("/api/v1/users", narrow); r.Status != http.StatusForbidden {
			t.Fatalf("GET /users with svc.job.READ: %d %s", r.Status, r.Body)
		}
		r := env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/users/" + models.FormatID(userID), Token: narrow,
			Body: map[string]any{"title": "x"}})
		if r.Status != http.StatusForbidden {
			t.Fatalf("PATCH /users/{id} with svc.job.READ: %d %s", r.Status, r.Body)
		}
		if r := env.Get("/api/v1/users", "not-a-token"); r.Status != http.StatusUnauthorized {
			t.Fatalf("an unknown token: %d", r.Status)
		}

		evs := modeltest.EventsOfType(t, db, org, audit.AccessDenied)
		if len(evs) != 2 {
			t.Fatalf("%d access.denied events, want 2 (the 401 records none): %+v", len(evs), evs)
		}
		for i, want := range []struct{ route, scope string }{
			{"GET /api/v1/users", "svc.user.READ"},
			{"PATCH /api/v1/users/{user_id}", "svc.user.UPDATE"},
		} {
			ev := evs[i]
			if ev.Outcome.Result != models.ResultDenied || !strings.Contains(ev.Outcome.Reason, want.scope) {
				t.Errorf("%s: outcome %+v, want DENIED naming %s", want.route, ev.Outcome, want.scope)
			}
			if ev.Actor != (models.Actor{Type: models.ActorUser, ID: models.FormatID(userID), DisplayName: "Narrow Nora"}) {
				t.Errorf("%s: actor %+v", want.route, ev.Actor)
			}
			if len(ev.Targets) != 1 || ev.Targets[0].Type != api.RouteTargetType || ev.Targets[0].ID != want.route || ev.RequestID == "" {
				t.Errorf("%s: targets %+v, request %q", want.route, ev.Targets, ev.RequestID)
			}
		}
		var bodies []string
		if err := db.NewSelect().Table("audit_events").Column("body").Scan(t.Context(), &bodies); err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			if strings.Contains(b, narrow) {
				t.Errorf("an event holds the token: %s", b)
			}
		}
	})
}

// TestAgent_RefusedRegistrationIsRecorded: a registration past the device
// cap (the key named the organization) records access.denied, the agent
// its actor; one with a wrong installation key names no organization and
// records nothing; neither event holds the key.
func TestAgent_RefusedRegistrationIsRecorded(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{MaxDevicesPerOrg: 1})
		key := installKey(t, env)
		registerAgent(t, env, key, agentFacts("A", "SA"))
		resp := env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register", Body: registerBody(key, agentFacts("B", "SB"))})
		if resp.Status != http.StatusConflict {
			t.Fatalf("past the cap: %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/register", Body: registerBody(key+"x", agentFacts("C", "SC"))})
		if resp.Status != http.StatusUnauthorized {
			t.Fatalf("a wrong key: %d %s", resp.Status, resp.Body)
		}
		evs := modeltest.EventsOfType(t, db, env.Org.ID, audit.AccessDenied)
		if len(evs) != 1 {
			t.Fatalf("%d access.denied events, want 1: %+v", len(evs), evs)
		}
		ev := evs[0]
		if ev.Actor.Type != models.ActorDevice || ev.Actor.DisplayName != "B" || ev.Outcome.Result != models.ResultDenied ||
			!strings.Contains(ev.Outcome.Reason, "device") || len(ev.Targets) != 1 || ev.Targets[0].ID != "POST /agent/v1/register" {
			t.Errorf("access.denied = %+v", ev)
		}
		var bodies []string
		if err := db.NewSelect().Table("audit_events").Column("body").Scan(t.Context(), &bodies); err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			if strings.Contains(b, key) {
				t.Errorf("an event holds the installation key: %s", b)
			}
		}
	})
}
