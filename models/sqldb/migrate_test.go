package sqldb_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/sqldb"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// schemaTables are tables the migrations create.
var schemaTables = []string{"organizations", "jobs", "job_results", "blobs", "blob_chunks"}

// TestMigrate rolls the schema all the way down and up again, and checks that
// migrating an up-to-date database changes nothing.
func TestMigrate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		checkTables(t, db, true)

		// Down to an empty schema, one group at a time.
		var rolledBack []string
		for {
			group, err := sqldb.MigrateDown(ctx, db)
			if err != nil {
				t.Fatalf("MigrateDown: %v", err)
			}
			if len(group) == 0 {
				break
			}
			rolledBack = append(rolledBack, group...)
		}
		if len(rolledBack) == 0 {
			t.Fatal("MigrateDown rolled back nothing on a migrated database")
		}
		checkTables(t, db, false)

		applied, err := sqldb.MigrateUp(ctx, db)
		if err != nil {
			t.Fatalf("MigrateUp on an empty schema: %v", err)
		}
		slices.Sort(applied)
		slices.Sort(rolledBack)
		if !slices.Equal(applied, rolledBack) {
			t.Errorf("MigrateUp applied %v, want what MigrateDown rolled back: %v", applied, rolledBack)
		}
		checkTables(t, db, true)
		checkStatus(t, db)

		for range 2 {
			again, err := sqldb.MigrateUp(ctx, db)
			if err != nil {
				t.Fatalf("MigrateUp on an up-to-date schema: %v", err)
			}
			if len(again) != 0 {
				t.Errorf("MigrateUp on an up-to-date schema applied %v, want nothing", again)
			}
		}
		checkTables(t, db, true)
	})
}

// TestMigrateUp_Concurrent checks that several MigrateUp calls at once (the
// service's processes starting together) apply each migration exactly once,
// all of them succeeding.
func TestMigrateUp_Concurrent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		for {
			group, err := sqldb.MigrateDown(ctx, db)
			if err != nil {
				t.Fatalf("MigrateDown: %v", err)
			}
			if len(group) == 0 {
				break
			}
		}
		// As new as a database gets: not even the migrator's own tables.
		for _, table := range []string{"bun_migrations", "bun_migration_locks"} {
			if _, err := db.NewDropTable().Table(table).Exec(ctx); err != nil {
				t.Fatalf("drop %s: %v", table, err)
			}
		}

		const n = 4
		var wg sync.WaitGroup
		results := make([][]string, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = sqldb.MigrateUp(ctx, db)
			})
		}
		wg.Wait()
		var applied []string
		for i := range n {
			if errs[i] != nil {
				t.Errorf("MigrateUp #%d of %d at once: %v", i, n, errs[i])
			}
			applied = append(applied, results[i]...)
		}
		sorted := slices.Clone(applied)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != len(applied) || len(applied) == 0 {
			t.Errorf("MigrateUp calls at once applied %v together, want each migration once", applied)
		}
		checkTables(t, db, true)
	})
}

// checkTables checks that every schema table exists, or that none does.
func checkTables(t *testing.T, db *bun.DB, exist bool) {
	t.Helper()
	for _, table := range schemaTables {
		var n int
		var err error
		if sqldb.IsPostgres(db) {
			err = db.NewRaw("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?", table).
				Scan(context.Background(), &n)
		} else {
			err = db.NewRaw("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", table).
				Scan(context.Background(), &n)
		}
		if err != nil {
			t.Fatalf("look up table %s: %v", table, err)
		}
		switch {
		case exist && n != 1:
			t.Errorf("table %s is missing", table)
		case !exist && n != 0:
			t.Errorf("table %s still exists", table)
		}
	}
}

// checkStatus checks that the status report lists no pending migration.
func checkStatus(t *testing.T, db *bun.DB) {
	t.Helper()
	var b strings.Builder
	if err := sqldb.WriteMigrationStatus(context.Background(), db, &b); err != nil {
		t.Fatalf("WriteMigrationStatus: %v", err)
	}
	if strings.Contains(b.String(), "pending") || !strings.Contains(b.String(), "applied") {
		t.Errorf("migration status after MigrateUp:\n%s\nwant every migration applied", b.String())
	}
}
