package sqldb

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"
)

// The schema lives in migrations/*.tx.up.sql and *.tx.down.sql, named
// <timestamp>_<what>, applied in name order, each in a transaction. The files
// are text/template documents rendered with sqlTypes, so one file serves both
// dialects: write {{.Time}} for a timestamp, {{.Blob}} for bytes, {{.JSON}}
// for a JSON document, and {{if .Postgres}}…{{end}} for the rare statement
// only one dialect has.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// sqlTypes are the column types a migration may name.
type sqlTypes struct {
	Postgres bool
	Time     string
	Blob     string
	JSON     string
}

func typesFor(db *bun.DB) sqlTypes {
	return DialectOf(db).migrationTypes()
}

// Migrator returns the migrator over the embedded migrations.
func Migrator(db *bun.DB) (*migrate.Migrator, error) {
	migrations := migrate.NewMigrations()
	if err := migrations.Discover(migrationFiles); err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	return migrate.NewMigrator(db, migrations,
		migrate.WithTemplateData(typesFor(db)),
		migrate.WithMarkAppliedOnSuccess(true),
	), nil
}

// MigrateUp applies every migration not applied yet. Several processes may
// call it at once: the migrator's lock lets one through at a time while the
// others wait for it.
func MigrateUp(ctx context.Context, db *bun.DB) (applied []string, err error) {
	return runLocked(ctx, db, "migrate", func(m *migrate.Migrator) (*migrate.MigrationGroup, error) {
		return m.Migrate(ctx)
	})
}

// MigrateDown rolls back the last group of applied migrations.
func MigrateDown(ctx context.Context, db *bun.DB) (rolledBack []string, err error) {
	return runLocked(ctx, db, "roll back", func(m *migrate.Migrator) (*migrate.MigrationGroup, error) {
		return m.Rollback(ctx)
	})
}

// runLocked runs step under the migrator's lock and names the migrations it
// touched.
func runLocked(ctx context.Context, db *bun.DB, what string, step func(*migrate.Migrator) (*migrate.MigrationGroup, error)) ([]string, error) {
	m, err := Migrator(db)
	if err != nil {
		return nil, err
	}
	if err = initAndLock(ctx, m); err != nil {
		return nil, err
	}
	defer m.Unlock(context.WithoutCancel(ctx)) //nolint:errcheck
	group, err := step(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	names := make([]string, 0, len(group.Migrations))
	for _, mig := range group.Migrations {
		names = append(names, mig.String())
	}
	return names, nil
}

// lockWait bounds how long initAndLock waits for another process's lock.
const lockWait = 2 * time.Minute

// initAndLock creates the migrator's tables and takes its lock, waiting while
// another process holds it. The migrator's Lock fails at once when the lock is
// taken, and two processes creating the tables at once can collide on
// PostgreSQL: both are retried. A lock left by a crashed process is never
// released; after lockWait the error says so.
func initAndLock(ctx context.Context, m *migrate.Migrator) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := m.Init(ctx)
		if err != nil && !IsUniqueViolation(err) && !isAlreadyExists(err) {
			return fmt.Errorf("init migrations: %w", err)
		}
		if err == nil {
			if err = m.Lock(ctx); err == nil {
				return nil
			}
			if !IsUniqueViolation(err) {
				return fmt.Errorf("lock migrations: %w", err)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lock migrations: waited %v: %w (if no migration is running, a crashed one left its lock: delete it from bun_migration_locks)", lockWait, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lock migrations: %w (%w)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// isAlreadyExists reports whether err is PostgreSQL's "relation (or type)
// already exists", which CREATE TABLE IF NOT EXISTS still returns to the loser
// of a race.
func isAlreadyExists(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P07" || pgErr.Code == "42710")
}

// WriteMigrationStatus prints each migration with applied or pending.
func WriteMigrationStatus(ctx context.Context, db *bun.DB, w io.Writer) error {
	m, err := Migrator(db)
	if err != nil {
		return err
	}
	if err = m.Init(ctx); err != nil {
		return fmt.Errorf("init migrations: %w", err)
	}
	ms, err := m.MigrationsWithStatus(ctx)
	if err != nil {
		return fmt.Errorf("read migration status: %w", err)
	}
	for _, mig := range ms {
		state := "pending"
		if mig.IsApplied() {
			state = "applied (group " + fmt.Sprint(mig.GroupID) + ")"
		}
		if _, err := fmt.Fprintf(w, "%-50s %s\n", mig.String(), state); err != nil {
			return err
		}
	}
	if len(ms) == 0 {
		if _, err := fmt.Fprintln(w, "no migrations"); err != nil {
			return err
		}
	}
	return nil
}
