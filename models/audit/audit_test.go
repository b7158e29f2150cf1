package audit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/listing"
	"iam/models/sqldb"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// record writes n events of org in one transaction, as a store method does.
func record(t *testing.T, ctx context.Context, db *bun.DB, org int64, n int, typ string) {
	t.Helper()
	err := sqldb.InTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		for i := range n {
			if err := models.Record(ctx, models.AuditEvent{OrgID: org, Type: typ,
				Targets: []models.EventTarget{{Type: "user", ID: fmt.Sprint(1000 + i), DisplayName: "u"}}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func signer(t *testing.T) *audit.Signer {
	t.Helper()
	s, err := audit.NewSigner(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type event struct {
	ID        string `json:"id"`
	Sequence  int64  `json:"sequence"`
	EventType string `json:"event_type"`
	Actor     struct {
		Type, ID string
	} `json:"actor"`
	RequestID string `json:"request_id"`
}

func decode(t *testing.T, raw []json.RawMessage) []event {
	t.Helper()
	out := make([]event, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestEvents_WrittenWithTheirTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := models.WithOrigin(context.Background(), models.Origin{
			Actor: models.Actor{Type: models.ActorUser, ID: "7", DisplayName: "Ann"}, RequestID: "req-1", IPAddress: "192.0.2.1"})
		record(t, ctx, db, 1, 2, "user.created")
		// A transaction that rolls back leaves no event.
		boom := errors.New("boom")
		err := sqldb.InTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
			if err := models.Record(ctx, models.AuditEvent{OrgID: 1, Type: "user.deleted"}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InTx = %v, want boom", err)
		}
		// Outside a transaction an event cannot be recorded.
		if err = models.Record(ctx, models.AuditEvent{OrgID: 1, Type: "user.deleted"}); !errors.Is(err, models.ErrNoTransaction) {
			t.Fatalf("Record outside InTx = %v", err)
		}
		record(t, ctx, db, 2, 1, "group.created") // another organization
		record(t, ctx, db, 1, 1, "group.created")

		store := audit.NewEventStore(db)
		raw, meta, err := store.List(ctx, 1, audit.Query{})
		if err != nil {
			t.Fatal(err)
		}
		got := decode(t, raw)
		if len(got) != 3 || got[0].Sequence != 1 || got[2].Sequence != 3 || got[2].EventType != "group.created" ||
			got[0].Actor.ID != "7" || got[0].RequestID != "req-1" {
			t.Fatalf("events = %+v", got)
		}
		if !meta.IsLast || meta.NextCursor == nil {
			t.Fatalf("meta = %+v: an ascending last page points on", meta)
		}
		// Following the cursor shows what commits later, once.
		raw, _, err = store.List(ctx, 1, audit.Query{Cursor: *meta.NextCursor})
		if err != nil || len(raw) != 0 {
			t.Fatalf("after the end: %d events, %v", len(raw), err)
		}
		record(t, ctx, db, 1, 2, "user.updated")
		raw, _, err = store.List(ctx, 1, audit.Query{Cursor: *meta.NextCursor})
		if got := decode(t, raw); err != nil || len(got) != 2 || got[0].Sequence != 4 {
			t.Fatalf("tail = %+v, %v", got, err)
		}
		// Filters; another query's cursor is refused.
		f, err := audit.ParseFilter(`event_type eq "user.updated" and actor.id eq "7"`)
		if err != nil {
			t.Fatal(err)
		}
		raw, _, err = store.List(ctx, 1, audit.Query{Filter: f})
		if err != nil || len(raw) != 2 {
			t.Fatalf("filtered: %d, %v", len(raw), err)
		}
		var pe *listing.ParamError
		if _, _, err = store.List(ctx, 1, audit.Query{Filter: f, Cursor: *meta.NextCursor}); !errors.As(err, &pe) || pe.Param != "cursor" {
			t.Fatalf("foreign cursor: %v", err)
		}
		// Descending, and one event by id.
		raw, meta, err = store.List(ctx, 1, audit.Query{Descending: true, Limit: 2})
		if got := decode(t, raw); err != nil || len(got) != 2 || got[0].Sequence != 5 || meta.IsLast {
			t.Fatalf("descending = %+v %+v %v", got, meta, err)
		}
		id, _ := models.ParseID("id", decode(t, raw)[0].ID)
		if one, err := store.Get(ctx, 1, id); err != nil || !strings.Contains(string(one), `"sequence":5`) {
			t.Fatalf("Get = %s, %v", one, err)
		}
		if _, err := store.Get(ctx, 2, id); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("Get from another organization = %v", err)
		}
		var n int
		if err := store.Each(ctx, 1, audit.Query{}, func(string) error { n++; return nil }); err != nil || n != 5 {
			t.Fatalf("Each: %d, %v", n, err)
		}
	})
}

// TestEvents_NumberPending: what the API runs every second numbers every
// organization's committed events, and nothing when there is nothing new.
// On SQLite the events are numbered as they are written.
func TestEvents_NumberPending(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := audit.NewEventStore(db)
		record(t, ctx, db, 1, 3, "user.created")
		record(t, ctx, db, 2, 2, "user.created")
		record(t, ctx, db, 1, 1, "user.deleted")
		// The seal schedule finds organizations with unnumbered events only.
		if sealed, err := audit.NewDigestStore(db).Orgs(ctx); err != nil || !slices.Equal(sealed, []int64{1, 2}) {
			t.Fatalf("Orgs = %v, %v; want [1 2]", sealed, err)
		}
		orgs, err := store.NumberPending(ctx)
		wantOrgs := 0
		if sqldb.IsPostgres(db) {
			wantOrgs = 2
		}
		if err != nil || orgs != wantOrgs {
			t.Fatalf("NumberPending = %d, %v; want %d organizations", orgs, err, wantOrgs)
		}
		var heads []struct {
			OrgID   int64 `bun:"org_id"`
			LastSeq int64 `bun:"last_seq"`
		}
		if err = db.NewSelect().Table("audit_heads").Column("org_id", "last_seq").Order("org_id").Scan(ctx, &heads); err != nil {
			t.Fatal(err)
		}
		if len(heads) != 2 || heads[0].LastSeq != 4 || heads[1].LastSeq != 2 {
			t.Errorf("heads %+v, want org 1 at 4 and org 2 at 2", heads)
		}
		var unnumbered int
		if err = db.NewSelect().Table("audit_events").ColumnExpr("count(*)").Where("seq IS NULL OR hash IS NULL OR body LIKE ?",
			`%"sequence":0,%`).Scan(ctx, &unnumbered); err != nil {
			t.Fatal(err)
		}
		if unnumbered != 0 {
			t.Errorf("%d events left without their number", unnumbered)
		}
		if orgs, err = store.NumberPending(ctx); err != nil || orgs != 0 {
			t.Errorf("NumberPending with nothing new = %d, %v", orgs, err)
		}
	})
}

func TestDigests_SealAndVerify(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		digests, s := audit.NewDigestStore(db), signer(t)
		keys := []ed25519.PublicKey{s.PublicKey()}
		record(t, ctx, db, 1, 5, "user.created")
		d1, err := digests.Seal(ctx, 1, s, time.Now())
		if err != nil || d1 == nil || d1.EventCount != 5 || d1.FromSeq != 1 || d1.ToSeq != 5 {
			t.Fatalf("Seal = %+v, %v", d1, err)
		}
		if d, sealErr := digests.Seal(ctx, 1, s, time.Now()); sealErr != nil || d != nil {
			t.Fatalf("Seal with nothing new = %+v, %v", d, sealErr)
		}
		record(t, ctx, db, 1, 4, "user.updated")
		d2, err := digests.Seal(ctx, 1, s, time.Now())
		if err != nil || d2.Number != 2 || d2.FromSeq != 6 || d2.PreviousHash != d1.DigestHash {
			t.Fatalf("second Seal = %+v, %v", d2, err)
		}
		record(t, ctx, db, 1, 1, "user.deleted") // not sealed yet
		res, err := digests.Verify(ctx, 1, keys, time.Time{})
		if err != nil || len(res.Problems) != 0 || res.Sealed != 9 || res.Unsealed != 1 || res.Digests != 2 {
			t.Fatalf("untouched log: %+v, %v", res, err)
		}

		// Tamper: alter an event, delete one, insert one past the head,
		// replace a digest's signature.
		mustExec(t, db, `UPDATE audit_events SET body = replace(body, 'user.created', 'user.deleted') WHERE org_id = 1 AND seq = 2`)
		mustExec(t, db, `DELETE FROM audit_events WHERE org_id = 1 AND seq = 7`)
		mustExec(t, db, `INSERT INTO audit_events (org_id, seq, id, published, event_type, actor_type, actor_id, result, request_id, target_type, target_id, body, hash)
			SELECT org_id, 99, id + 1, published, event_type, actor_type, actor_id, result, request_id, target_type, target_id, replace(body, '"sequence":10', '"sequence":99'), hash FROM audit_events WHERE org_id = 1 AND seq = 10`)
		mustExec(t, db, `UPDATE audit_digests SET event_count = 5 WHERE org_id = 1 AND number = 2`)
		res, err = digests.Verify(ctx, 1, keys, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(res.Problems, "\n")
		for _, want := range []string{"event 2 (id", "altered", "event 7: removed", "event 99", "inserted", "digest 2: altered"} {
			if !strings.Contains(text, want) {
				t.Errorf("problems lack %q:\n%s", want, text)
			}
		}
	})
}

func mustExec(t *testing.T, db *bun.DB, query string) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// TestEvents_TailSeesEveryEventOnceUnderConcurrentWriters: 8 writers commit
// events on PostgreSQL (transactions of one to three events, some rolled
// back, committing out of the order they began) while a reader follows
// next_cursor: it sees every committed event exactly once, in sequence
// order.
func TestEvents_TailSeesEveryEventOnceUnderConcurrentWriters(t *testing.T) {
	db := dbtest.Postgres(t)
	duration := 30 * time.Second
	if testing.Short() {
		duration = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	store := audit.NewEventStore(db)
	done := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := 0; ctx.Err() == nil; i++ {
				n := 1 + i%3
				rollback := i%7 == 3
				err := sqldb.InTx(context.Background(), db, func(txCtx context.Context, tx bun.Tx) error {
					for k := range n {
						if err := models.Record(txCtx, models.AuditEvent{OrgID: 1, Type: "user.updated",
							Targets: []models.EventTarget{{Type: "user", ID: fmt.Sprintf("%d-%d-%d", w, i, k)}}}); err != nil {
							return err
						}
					}
					// Hold the transaction a moment, so that others begin
					// and commit around it.
					if _, err := tx.ExecContext(txCtx, "SELECT pg_sleep(0.002)"); err != nil {
						return err
					}
					if rollback {
						return errRolledBack
					}
					return nil
				})
				if err != nil && !errors.Is(err, errRolledBack) {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	// Another reader numbers the events as well (a hook's dispatcher, say):
	// the two numberings must not give a number twice or leave a gap.
	numbered := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if _, err := sqldb.NumberAuditEvents(context.Background(), db, 1); err != nil {
				numbered <- err
				return
			}
			time.Sleep(3 * time.Millisecond)
		}
		numbered <- nil
	}()
	seen := map[int64]bool{}
	var last int64
	cursor := ""
	follow := func() {
		for {
			raw, meta, err := store.List(context.Background(), 1, audit.Query{Cursor: cursor, Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range decode(t, raw) {
				if seen[e.Sequence] || e.Sequence <= last {
					t.Fatalf("event %d seen twice or out of order (after %d)", e.Sequence, last)
				}
				seen[e.Sequence], last = true, e.Sequence
			}
			cursor = *meta.NextCursor
			if meta.IsLast {
				return
			}
		}
	}
	for ctx.Err() == nil {
		follow()
		time.Sleep(5 * time.Millisecond)
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-numbered; err != nil {
		t.Fatal(err)
	}
	follow()
	var rehashed int
	if err := db.NewSelect().Table("audit_events").ColumnExpr("count(*)").
		Where("org_id = 1 AND hash = encode(sha256(convert_to(body, 'UTF8')), 'hex')").Scan(context.Background(), &rehashed); err != nil {
		t.Fatal(err)
	}
	if rehashed != len(seen) {
		t.Errorf("%d of the %d events seen have the hash of their body", rehashed, len(seen))
	}
	var total int64
	if err := db.NewSelect().Table("audit_events").ColumnExpr("count(*)").Where("org_id = 1").Scan(context.Background(), &total); err != nil {
		t.Fatal(err)
	}
	if int64(len(seen)) != total || last != total {
		t.Fatalf("the reader saw %d events up to %d; %d were committed", len(seen), last, total)
	}
	t.Logf("%d events committed by 8 writers in %v, each seen once", total, duration)
}

var errRolledBack = errors.New("rolled back on purpose")

func TestChanges(t *testing.T) {
	type settings struct {
		ID                  int64  `json:"id,string"`
		Big                 int64  `json:"big"`
		Name                string `json:"name"`
		InstallationKey     string `json:"installation_key"`
		ClientSecret        string `json:"clientSecret"`
		PasswordlessEnabled bool   `json:"passwordless_enabled"`
		Hidden              string `json:"-"`
		Same                string `json:"same"`
	}
	before := settings{ID: 1, Big: 388145959290015745, Name: "a", InstallationKey: "k1", ClientSecret: "s1", Hidden: "h1", Same: "x"}
	after := settings{ID: 1, Big: 388145959290015746, Name: "b", InstallationKey: "k2", ClientSecret: "s2", PasswordlessEnabled: true, Hidden: "h2", Same: "x"}
	got, _ := json.Marshal(audit.Changes(before, after))
	want := `[{"field":"big","old":388145959290015745,"new":388145959290015746},` +
		`{"field":"clientSecret","old":null,"new":null,"secret":true},` +
		`{"field":"installation_key","old":null,"new":null,"secret":true},` +
		`{"field":"name","old":"a","new":"b"},` +
		`{"field":"passwordless_enabled","old":false,"new":true}]`
	if string(got) != want {
		t.Fatalf("Changes =\n%s\nwant\n%s", got, want)
	}
}

// TestDigests_VerifyWhileEventsAreWritten: a verification that runs while
// transactions keep recording events reads one state of the log: the
// events committed meanwhile are neither "inserted" past the head it read
// nor anything else wrong.
func TestDigests_VerifyWhileEventsAreWritten(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		digests, s := audit.NewDigestStore(db), signer(t)
		keys := []ed25519.PublicKey{s.PublicKey()}
		for range 4 {
			record(t, ctx, db, 1, 500, "user.created")
		}
		if _, err := digests.Seal(ctx, 1, s, time.Now()); err != nil {
			t.Fatal(err)
		}
		writing, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			var err error
			for writing.Err() == nil && err == nil {
				err = sqldb.InTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
					return models.Record(ctx, models.AuditEvent{OrgID: 1, Type: "user.updated"})
				})
			}
			done <- err
		}()
		for range 20 {
			res, err := digests.Verify(ctx, 1, keys, time.Time{})
			if err != nil || len(res.Problems) != 0 || res.Sealed != 2000 {
				stop()
				t.Fatalf("verification while events are written: %d sealed, problems %q, %v", res.Sealed, res.Problems, err)
			}
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestChanges_Maps: two maps (a user's view) are compared by their values'
// JSON: values of other types with one encoding are equal, pointers are
// compared by what they point to, and a name only one of them has changed.
func TestChanges_Maps(t *testing.T) {
	a, b := "x", "x"
	when := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	before := map[string]any{"name": "a", "count": int64(1), "title": &a, "tags": []string{"p"},
		"installation_key": "k1", "gone": "g", "at": when, "same": []string{"q"}}
	after := map[string]any{"name": "b", "count": float64(1), "title": &b, "tags": []string{"p", "r"},
		"installation_key": "k2", "added": true, "at": when.Add(time.Second), "same": []string{"q"}}
	got, _ := json.Marshal(audit.Changes(before, after))
	want := `[{"field":"added","old":null,"new":true},` +
		`{"field":"at","old":"2026-12-07T10:00:00Z","new":"2026-12-07T10:00:01Z"},` +
		`{"field":"gone","old":"g","new":null},` +
		`{"field":"installation_key","old":null,"new":null,"secret":true},` +
		`{"field":"name","old":"a","new":"b"},` +
		`{"field":"tags","old":["p"],"new":["p","r"]}]`
	if string(got) != want {
		t.Fatalf("Changes =\n%s\nwant\n%s", got, want)
	}
	if got := audit.Changes(before, before); len(got) != 0 {
		t.Errorf("Changes of a map and itself = %v, want none", got)
	}
}
