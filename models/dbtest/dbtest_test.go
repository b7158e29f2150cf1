package dbtest_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/sqldb"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestEach checks that Each gives each dialect a migrated database of its
// own, and that no two tests share a database.
func TestEach(t *testing.T) {
	var mu sync.Mutex
	ran := map[string]string{}
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		mu.Lock()
		ran[t.Name()] = db.Dialect().Name().String()
		mu.Unlock()

		insertOrg(t, db, 1)
		if n := countOrgs(t, db); n != 1 {
			t.Fatalf("organizations holds %d rows after one insert, want 1", n)
		}
		var other *bun.DB
		if sqldb.IsPostgres(db) {
			other = dbtest.Postgres(t)
		} else {
			other = dbtest.SQLite(t)
		}
		if n := countOrgs(t, other); n != 0 {
			t.Fatalf("a second fresh database holds %d organizations, want 0: databases are shared", n)
		}
		var applied int
		if err := db.NewRaw("SELECT count(*) FROM bun_migrations").Scan(ctx, &applied); err != nil {
			t.Fatalf("read bun_migrations: %v", err)
		}
		if applied == 0 {
			t.Fatal("bun_migrations is empty: the database was not migrated")
		}
	})
	want := map[string]string{"TestEach/sqlite": "sqlite", "TestEach/postgres": "pg"}
	for name, dialect := range want {
		got, ok := ran[name]
		if !ok && name == "TestEach/postgres" {
			continue // skipped for want of PostgreSQL; the skip says why
		}
		if got != dialect {
			t.Errorf("subtest %s ran on dialect %q, want %q", name, got, dialect)
		}
	}
}

// TestSQLite_SameSubtestNames checks that subtests of the same name, whose
// temporary folders hold a '#' (x, x#01), each get a fresh file of their own.
func TestSQLite_SameSubtestNames(t *testing.T) {
	for i := range 2 {
		t.Run("x", func(t *testing.T) {
			db := dbtest.SQLite(t)
			var seq int
			var schema, file string
			if err := db.QueryRowContext(t.Context(), "PRAGMA database_list").Scan(&seq, &schema, &file); err != nil {
				t.Fatalf("PRAGMA database_list: %v", err)
			}
			if want := filepath.Dir(t.TempDir()); filepath.Dir(filepath.Dir(file)) != want {
				t.Errorf("subtest %s uses database file %s, want one under %s", t.Name(), file, want)
			}
			if n := countOrgs(t, db); n != 0 {
				t.Errorf("subtest %d: fresh database holds %d organizations, want 0", i, n)
			}
			insertOrg(t, db, 1)
		})
	}
}

// TestPostgresURL checks that the URL names a migrated database of its own,
// reachable by a separate connection, and that the database is dropped
// when its test ends even while something is still connected to it.
func TestPostgresURL(t *testing.T) {
	var name string
	t.Run("inner", func(t *testing.T) {
		dsn := dbtest.PostgresURL(t)
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("PostgresURL returned %q: %v", dsn, err)
		}
		name = strings.TrimPrefix(u.Path, "/")
		db, err := sqldb.Open(t.Context(), dsn)
		if err != nil {
			t.Fatalf("open %s: %v", dsn, err)
		}
		// Left open on purpose, like a service subprocess that is still
		// running: the drop must disconnect it.
		var current string
		if err := db.NewRaw("SELECT current_database()").Scan(t.Context(), &current); err != nil {
			t.Fatalf("query current_database: %v", err)
		}
		if current != name {
			t.Errorf("connected to database %q, want %q", current, name)
		}
		insertOrg(t, db, 7)
	})
	if name == "" {
		t.Skip("the inner test did not get a database; its own message says why")
	}
	db := dbtest.Postgres(t)
	var n int
	if err := db.NewRaw("SELECT count(*) FROM pg_database WHERE datname = ?", name).Scan(t.Context(), &n); err != nil {
		t.Fatalf("query pg_database: %v", err)
	}
	if n != 0 {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

// TestParallel creates databases from many parallel tests at once.
func TestParallel(t *testing.T) {
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, db *bun.DB) {
				insertOrg(t, db, int64(i+1))
				if n := countOrgs(t, db); n != 1 {
					t.Fatalf("organizations holds %d rows, want 1", n)
				}
			})
		})
	}
}

// Every fresh database, on both dialects, is ready with every migration the
// binary embeds applied and no rows of its own; how long one takes (created,
// opened, closed and dropped) is logged with -v.
func TestFreshDatabase_FullyMigratedAndEmpty(t *testing.T) {
	const n = 5
	// The cluster's start is not what is measured here.
	t.Run("start", func(t *testing.T) { dbtest.Postgres(t) })
	for _, c := range []struct {
		name string
		open func(testing.TB) *bun.DB
	}{{"sqlite", dbtest.SQLite}, {"postgres", dbtest.Postgres}} {
		var ready time.Duration
		begin := time.Now()
		for i := range n {
			t.Run(fmt.Sprintf("%s/%d", c.name, i), func(t *testing.T) {
				start := time.Now()
				db := c.open(t)
				ready += time.Since(start)
				m, err := sqldb.Migrator(db)
				if err != nil {
					t.Fatal(err)
				}
				ms, err := m.MigrationsWithStatus(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if len(ms) == 0 || len(ms.Unapplied()) != 0 {
					t.Errorf("%d migrations, %d not applied: %v", len(ms), len(ms.Unapplied()), ms.Unapplied())
				}
				if got := countOrgs(t, db); got != 0 {
					t.Errorf("a fresh database holds %d organizations", got)
				}
				insertOrg(t, db, int64(1000+i)) // the next one must not see it
			})
		}
		total := time.Since(begin)
		t.Logf("%s: %v per fresh database until ready, %v including close and drop (mean of %d)",
			c.name, (ready / n).Round(100*time.Microsecond), (total / n).Round(100*time.Microsecond), n)
	}
}

func insertOrg(t *testing.T, db bun.IDB, id int64) {
	t.Helper()
	_, err := db.NewRaw("INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)",
		id, "org", time.Now().UTC()).Exec(context.WithoutCancel(t.Context()))
	if err != nil {
		t.Fatalf("insert organization: %v", err)
	}
}

func countOrgs(t *testing.T, db bun.IDB) int {
	t.Helper()
	var n int
	if err := db.NewRaw("SELECT count(*) FROM organizations").Scan(t.Context(), &n); err != nil {
		t.Fatalf("count organizations: %v", err)
	}
	return n
}
