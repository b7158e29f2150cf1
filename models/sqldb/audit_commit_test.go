package sqldb_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/sqldb"
)

// TestInTx_ChangeAndEventsCommitTogether: on PostgreSQL a change and its
// events commit together; an INSERT of the events that fails, and a COMMIT
// that fails (a deferred constraint), leave neither the change nor its
// events; one event and several in a transaction are written alike; the
// events are numbered after without gaps; and no connection
// goes back to the pool inside a transaction.
func TestInTx_ChangeAndEventsCommitTogether(t *testing.T) {
	db := dbtest.Postgres(t)
	if !sqldb.IsPostgres(db) {
		t.Skip("PostgreSQL only")
	}
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE commit_probe (id INT UNIQUE DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	const org = 2001
	change := func(ids []int, eventType string) error {
		return sqldb.InTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
			for _, id := range ids {
				if _, err := tx.ExecContext(ctx, "INSERT INTO commit_probe (id) VALUES (?)", id); err != nil {
					return err
				}
				if err := models.Record(ctx, models.AuditEvent{OrgID: org, Type: eventType}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	count := func(query string) int {
		t.Helper()
		var n int
		if err := db.NewRaw(query).Scan(ctx, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 20 {
		if err := change([]int{i}, "probe.created"); err != nil {
			t.Fatal(err)
		}
	}
	// The events' INSERT fails (PostgreSQL text holds no NUL): nothing of
	// the change is kept.
	err := change([]int{100}, "probe.\x00")
	if err == nil {
		t.Fatal("an event type with a NUL byte was written")
	}
	// The COMMIT fails: the deferred unique constraint is checked there.
	err = change([]int{200, 200}, "probe.created")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("a commit breaking a deferred constraint: %v, want its unique violation", err)
	}
	for i := range 5 {
		if err := change([]int{300 + i}, "probe.created"); err != nil {
			t.Fatal(err)
		}
	}
	if err := change([]int{400, 401, 402}, "probe.created"); err != nil {
		t.Fatal(err)
	}
	if n := count("SELECT count(*) FROM commit_probe"); n != 28 {
		t.Errorf("%d rows committed, want 28", n)
	}
	if n := count("SELECT count(*) FROM audit_events WHERE org_id = 2001"); n != 28 {
		t.Errorf("%d events committed, want 28", n)
	}
	if _, err := sqldb.NumberAuditEvents(ctx, db, 2001); err != nil {
		t.Fatal(err)
	}
	if n := count("SELECT max(seq) FROM audit_events WHERE org_id = 2001"); n != 28 {
		t.Errorf("events numbered up to %d, want 28 without gaps", n)
	}
	if n := count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`); n != 0 {
		t.Errorf("%d connections left idle in a transaction", n)
	}
}

// TestAuditIndexes_CoverNumberedRows: on PostgreSQL a change's transaction
// writes one index entry for its event, the pending rows'; every index
// that reads use covers only numbered rows (the numbering writes them).
func TestAuditIndexes_CoverNumberedRows(t *testing.T) {
	db := dbtest.Postgres(t)
	if !sqldb.IsPostgres(db) {
		t.Skip("PostgreSQL only")
	}
	var indexes []struct {
		Name string `bun:"indexname"`
		Def  string `bun:"indexdef"`
	}
	if err := db.NewRaw("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'audit_events' ORDER BY indexname").
		Scan(context.Background(), &indexes); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"audit_events_id": "WHERE (seq IS NOT NULL)", "audit_events_published": "WHERE (seq IS NOT NULL)",
		"audit_events_target": "WHERE (seq IS NOT NULL)", "audit_events_seq": "WHERE (seq IS NOT NULL)",
		"audit_events_pending": "WHERE (seq IS NULL)",
	}
	if len(indexes) != len(want) {
		t.Errorf("audit_events has %d indexes, want %d: %v", len(indexes), len(want), indexes)
	}
	for _, ix := range indexes {
		if pred, ok := want[ix.Name]; !ok || !strings.HasSuffix(ix.Def, pred) {
			t.Errorf("index %s: %s; want it to end %q", ix.Name, ix.Def, pred)
		}
	}
}
