package models

import (
	"context"
	"embed"
	"fmt"
	"io"
	"strings"

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
	if IsPostgres(db) {
		return sqlTypes{Postgres: true, Time: "TIMESTAMPTZ", Blob: "BYTEA", JSON: "JSONB"}
	}
	return sqlTypes{Time: "TIMESTAMP", Blob: "BLOB", JSON: "TEXT"}
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
// call it at once: the migrator's lock lets one through at a time.
func MigrateUp(ctx context.Context, db *bun.DB) (applied []string, err error) {
	m, err := Migrator(db)
	if err != nil {
		return nil, err
	}
	if err := m.Init(ctx); err != nil {
		return nil, fmt.Errorf("init migrations: %w", err)
	}
	if err := m.Lock(ctx); err != nil {
		return nil, fmt.Errorf("lock migrations: %w", err)
	}
	defer m.Unlock(context.WithoutCancel(ctx)) //nolint:errcheck
	group, err := m.Migrate(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	for _, mig := range group.Migrations {
		applied = append(applied, mig.String())
	}
	return applied, nil
}

// MigrateDown rolls back the last group of applied migrations.
func MigrateDown(ctx context.Context, db *bun.DB) (rolledBack []string, err error) {
	m, err := Migrator(db)
	if err != nil {
		return nil, err
	}
	if err := m.Init(ctx); err != nil {
		return nil, fmt.Errorf("init migrations: %w", err)
	}
	if err := m.Lock(ctx); err != nil {
		return nil, fmt.Errorf("lock migrations: %w", err)
	}
	defer m.Unlock(context.WithoutCancel(ctx)) //nolint:errcheck
	group, err := m.Rollback(ctx)
	if err != nil {
		return nil, fmt.Errorf("roll back: %w", err)
	}
	for _, mig := range group.Migrations {
		rolledBack = append(rolledBack, mig.String())
	}
	return rolledBack, nil
}

// WriteMigrationStatus prints each migration with applied or pending.
func WriteMigrationStatus(ctx context.Context, db *bun.DB, w io.Writer) error {
	m, err := Migrator(db)
	if err != nil {
		return err
	}
	if err := m.Init(ctx); err != nil {
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
		fmt.Fprintf(w, "%-50s %s\n", mig.String(), state)
	}
	if len(ms) == 0 {
		fmt.Fprintln(w, strings.TrimSpace("no migrations"))
	}
	return nil
}
