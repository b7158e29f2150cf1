package models

import (
	"context"

	"github.com/uptrace/bun"
)

// jobsDialect is the SQL of jobs that differs between PostgreSQL and SQLite
// (jobs_dialect_pg.go, jobs_dialect_sqlite.go), beside the shared primitives.
type jobsDialect interface {
	Dialect
	// recordChunk is JobStore.RecordChunk, in a transaction of its own.
	recordChunk(ctx context.Context, db *bun.DB, orgID, id int64, results []JobResult, p JobProgress) error
}

type jobsPG struct{ PGDialect }

type jobsSQLite struct{ SQLiteDialect }

// jobsDialectOf returns the statements for db's database.
func jobsDialectOf(db bun.IDB) jobsDialect {
	if IsPostgres(db) {
		return jobsPG{}
	}
	return jobsSQLite{}
}
