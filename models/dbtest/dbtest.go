// Package dbtest gives tests real, freshly migrated databases on both
// dialects the service supports: a SQLite file and a PostgreSQL database.
//
// A store test runs against both with Each:
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
//
//	func TestOrgStore_Create(t *testing.T) {
//		dbtest.Each(t, func(t *testing.T, db *bun.DB) {
//			...
//		})
//	}
//
// PostgreSQL comes from IAM_TEST_DATABASE_URL, a superuser URL of an existing
// server, when it is set. Otherwise the first test that needs PostgreSQL
// starts one throwaway cluster for the whole test process from the installed
// server binaries (initdb and pg_ctl on PATH or under
// /usr/lib/postgresql/*/bin, the newest wins), listening on 127.0.0.1 only,
// with its files in a temporary folder (under /dev/shm when there is one) and
// no durability. PostgreSQL refuses to run as root: a test process running as
// root runs it as the "postgres" system user. Main stops the cluster after the
// tests; a watchdog process stops it and removes its files should the test
// process end any other way (panic, timeout, kill). When no server binaries are
// installed at all, PostgreSQL tests are skipped with a message saying so,
// unless IAM_TEST_REQUIRE_POSTGRES is set, in which case they fail.
//
// The schema is migrated once into a template database; every test then gets
// its own copy (CREATE DATABASE ... TEMPLATE), dropped when the test ends, so
// tests may run in parallel.
package dbtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models/dbtest/pgcluster"
	"iam/models/sqldb"
)

// Environment variables read by the package.
const (
	// EnvDatabaseURL names a superuser URL of an existing PostgreSQL server
	// (postgres://user:pass@host:port/db). When set, no cluster is started.
	EnvDatabaseURL = "IAM_TEST_DATABASE_URL"
	// EnvRequirePostgres, when set to a non-empty value, turns the skip of
	// PostgreSQL tests on a machine without PostgreSQL into a failure (CI).
	EnvRequirePostgres = "IAM_TEST_REQUIRE_POSTGRES"
)

// Each runs fn as two subtests, "sqlite" and "postgres", each with a fresh,
// fully migrated database of its own. The postgres subtest is skipped, with
// the reason, only when no PostgreSQL is available at all (see the package
// documentation).
func Each(t *testing.T, fn func(t *testing.T, db *bun.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		fn(t, SQLite(t))
	})
	t.Run("postgres", func(t *testing.T) {
		fn(t, Postgres(t))
	})
}

// SQLite returns a fresh, fully migrated SQLite database in a file under
// t.TempDir(), opened with models.Open. It is closed when the test ends.
func SQLite(t testing.TB) *bun.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "iam.db")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sqldb.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatalf("dbtest: open SQLite database %s: %v", path, err)
	}
	t.Cleanup(func() { closeDB(t, db) })
	if _, err := sqldb.MigrateUp(ctx, db); err != nil {
		t.Fatalf("dbtest: migrate SQLite database %s: %v", path, err)
	}
	return db
}

// Postgres returns a fresh, fully migrated PostgreSQL database of its own,
// opened with models.Open. It is closed and dropped when the test ends.
func Postgres(t testing.TB) *bun.DB {
	t.Helper()
	dsn := PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("dbtest: open PostgreSQL database %s: %v", redact(dsn), err)
	}
	// Registered after PostgresURL's drop, so it runs before it.
	t.Cleanup(func() { closeDB(t, db) })
	return db
}

// PostgresURL creates a fresh, fully migrated PostgreSQL database and returns
// its URL (postgres://...), for tests that hand the database to something
// else, such as the service started as a subprocess. The database is dropped
// when the test ends, after disconnecting whoever is still connected.
func PostgresURL(t testing.TB) string {
	t.Helper()
	srv := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, dsn, err := srv.createDatabase(ctx)
	if err != nil {
		t.Fatalf("dbtest: create PostgreSQL database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.dropDatabase(ctx, name); err != nil {
			t.Errorf("dbtest: drop PostgreSQL database %s: %v", name, err)
		}
	})
	return dsn
}

// Main runs the tests of a package and exits with their result. Call it from
// TestMain:
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
//
// After the tests it stops the PostgreSQL cluster this process started, if
// any, and removes its files, so nothing is left running; a failure to do so
// fails the run.
func Main(m *testing.M) {
	code := m.Run()
	if err := shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// pgErrShown tells whether a test has reported pgErr in full.
var pgErrShown atomic.Bool

// server returns the PostgreSQL server of this process, starting it on first
// use. It skips or fails t when there is none.
func server(t testing.TB) *pgServer {
	t.Helper()
	pgOnce.Do(func() {
		start := time.Now()
		pgSrv, pgErr = startServer()
		if pgErr == nil {
			t.Logf("dbtest: PostgreSQL ready in %v (%s)", time.Since(start).Round(time.Millisecond), pgSrv.describe())
		}
	})
	switch {
	case errors.Is(pgErr, pgcluster.ErrNoServer):
		if os.Getenv(EnvRequirePostgres) != "" {
			t.Fatalf("dbtest: %v (and %s is set, so PostgreSQL tests may not be skipped)", pgErr, EnvRequirePostgres)
		}
		t.Skipf("dbtest: skipping PostgreSQL test: %v", pgErr)
	case pgErr != nil:
		if pgErrShown.Swap(true) {
			first, _, _ := strings.Cut(pgErr.Error(), "\n")
			t.Fatalf("dbtest: PostgreSQL is not available (the first test that asked for it shows the details): %s", first)
		}
		t.Fatalf("dbtest: PostgreSQL is not available: %v", pgErr)
	}
	return pgSrv
}

func closeDB(t testing.TB, db *bun.DB) {
	if err := db.Close(); err != nil {
		t.Errorf("dbtest: close database: %v", err)
	}
}
