package sqldb_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/sqldb"
)

// TestInTx_EventsNumberedAndHashed: the events of transactions are numbered
// per organization from 1 without gaps, each body is the event's JSON with
// its number, and each hash is EventHash of the body, however the dialect
// numbers and hashes them (on PostgreSQL the database puts the number in
// and hashes). The texts carry what could confuse either: the key of the
// number, quotes, backslashes, non-ASCII.
func TestInTx_EventsNumberedAndHashed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := models.WithOrigin(context.Background(), models.Origin{
			Actor:     models.Actor{Type: models.ActorUser, ID: "7", DisplayName: `Zoë "Admin" \ 管理者`},
			IPAddress: "203.0.113.9", UserAgent: `ua,"sequence":0,`, RequestID: "req-1", JobID: 42})
		tricky := models.EventTarget{Type: "user", ID: "11", DisplayName: `,"sequence":0, ∑ \u0000`,
			Changes: []models.FieldChange{{Field: "title", Old: "a\nb", New: `"c"`}}}
		const orgA, orgB = 1001, 1002
		for range 2 {
			err := sqldb.InTx(ctx, db, func(ctx context.Context, _ bun.Tx) error {
				for _, ev := range []models.AuditEvent{
					{OrgID: orgB, Type: "user.updated", Targets: []models.EventTarget{tricky}},
					{OrgID: orgA, Type: "user.created"},
					{OrgID: orgB, Type: "user.deleted", Result: models.ResultFailure, Reason: "é"},
				} {
					if err := models.Record(ctx, ev); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, org := range []int64{orgA, orgB} {
			if _, err := sqldb.NumberAuditEvents(context.Background(), db, org); err != nil {
				t.Fatal(err)
			}
		}
		var rows []sqldb.AuditEventRow
		if err := db.NewSelect().Model(&rows).Order("org_id", "seq").Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := map[int64]int64{orgA: 0, orgB: 0}
		for _, r := range rows {
			want[r.OrgID]++
			if r.Sequence != want[r.OrgID] {
				t.Errorf("org %d: event numbered %d, want %d", r.OrgID, r.Sequence, want[r.OrgID])
			}
			if r.Hash != sqldb.EventHash(r.Body) {
				t.Errorf("org %d event %d: hash %s is not the body's", r.OrgID, r.Sequence, r.Hash)
			}
			var rec models.EventRecord
			if err := json.Unmarshal([]byte(r.Body), &rec); err != nil {
				t.Fatalf("body %s: %v", r.Body, err)
			}
			if rec.Sequence != r.Sequence || rec.ID != models.FormatID(r.ID) || rec.EventType != r.EventType {
				t.Errorf("body %s does not name its row (seq %d, id %d, %s)", r.Body, r.Sequence, r.ID, r.EventType)
			}
			again, err := json.Marshal(rec)
			if err != nil || string(again) != r.Body {
				t.Errorf("body is not the record's JSON:\n%s\n%s", r.Body, again)
			}
			if r.EventType == "user.updated" && (len(rec.Targets) != 1 || rec.Targets[0].DisplayName != tricky.DisplayName ||
				rec.Actor.DisplayName != `Zoë "Admin" \ 管理者` || rec.JobID == nil || *rec.JobID != "42") {
				t.Errorf("body lost text: %s", r.Body)
			}
		}
		if want[orgA] != 2 || want[orgB] != 4 {
			t.Errorf("events by organization %v, want 2 and 4", want)
		}
	})
}
