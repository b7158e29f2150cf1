package modeltest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/sqldb"
)

// Events returns the audit events of the organization, oldest first, as
// the API shows them: numbered first.
func Events(t *testing.T, db bun.IDB, orgID int64) []models.EventRecord {
	t.Helper()
	if _, err := sqldb.NumberAuditEvents(context.Background(), db, orgID); err != nil {
		t.Fatalf("number audit events: %v", err)
	}
	var bodies []string
	err := db.NewSelect().Table("audit_events").Column("body").Where("org_id = ?", orgID).OrderExpr("seq").
		Scan(context.Background(), &bodies)
	if err != nil {
		t.Fatalf("read audit events: %v", err)
	}
	out := make([]models.EventRecord, len(bodies))
	for i, b := range bodies {
		if err := json.Unmarshal([]byte(b), &out[i]); err != nil {
			t.Fatalf("decode audit event %s: %v", b, err)
		}
	}
	return out
}

// EventsOfType returns the organization's audit events of type typ.
func EventsOfType(t *testing.T, db bun.IDB, orgID int64, typ string) []models.EventRecord {
	t.Helper()
	var out []models.EventRecord
	for _, e := range Events(t, db, orgID) {
		if e.EventType == typ {
			out = append(out, e)
		}
	}
	return out
}

// AdminOrigin is ctx carrying the origin of the changes store tests make:
// an admin user (id 7) and request req-1.
func AdminOrigin(ctx context.Context) context.Context {
	return models.WithOrigin(ctx, models.Origin{Actor: models.Actor{Type: models.ActorUser, ID: "7", DisplayName: "admin@example.com"},
		IPAddress: "192.0.2.7", RequestID: "req-1"})
}

// WantEvents returns the organization's events of type typ, failing the
// test unless there are n.
func WantEvents(t *testing.T, db bun.IDB, orgID int64, typ string, n int) []models.EventRecord {
	t.Helper()
	evs := EventsOfType(t, db, orgID, typ)
	if len(evs) != n {
		t.Fatalf("%d %s events, want %d: %+v", len(evs), typ, n, evs)
	}
	return evs
}

// OneEvent returns the organization's only event of type typ.
func OneEvent(t *testing.T, db bun.IDB, orgID int64, typ string) models.EventRecord {
	t.Helper()
	return WantEvents(t, db, orgID, typ, 1)[0]
}

// WantTargets checks an event's targets by type and id, in order, and by
// display name where want gives one.
func WantTargets(t *testing.T, ev models.EventRecord, want ...models.EventTarget) {
	t.Helper()
	if len(ev.Targets) != len(want) {
		t.Fatalf("%s targets %+v, want %+v", ev.EventType, ev.Targets, want)
	}
	for i, w := range want {
		g := ev.Targets[i]
		if g.Type != w.Type || g.ID != w.ID || (w.DisplayName != "" && g.DisplayName != w.DisplayName) {
			t.Errorf("%s target %d = %s %s %q, want %s %s %q", ev.EventType, i, g.Type, g.ID, g.DisplayName, w.Type, w.ID, w.DisplayName)
		}
	}
}

// ChangesOf returns a target's changes as field → [old, new] in JSON
// ("secret" for a field whose values never show).
func ChangesOf(t *testing.T, tg models.EventTarget) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range tg.Changes {
		if c.Secret {
			out[c.Field] = "secret"
			continue
		}
		b, err := json.Marshal([]any{c.Old, c.New})
		if err != nil {
			t.Fatal(err)
		}
		out[c.Field] = string(b)
	}
	return out
}
