package modeltest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
)

// Events returns the audit events of the organization, oldest first, as
// the API shows them.
func Events(t *testing.T, db bun.IDB, orgID int64) []models.EventRecord {
	t.Helper()
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
