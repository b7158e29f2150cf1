package jobs

import (
	"context"
	"iam/models/sqldb"

	"github.com/uptrace/bun"
)

// jobsDialect is the SQL of jobs that differs between PostgreSQL and SQLite
// (jobs_dialect_pg.go, jobs_dialect_sqlite.go), beside the shared primitives.
type jobsDialect interface {
	sqldb.Dialect
	// recordChunk is JobStore.RecordChunk, in a transaction of its own.
	recordChunk(ctx context.Context, db *bun.DB, orgID, id int64, results []JobResult, p JobProgress) error
}

type jobsPG struct{ sqldb.PGDialect }

type jobsSQLite struct{ sqldb.SQLiteDialect }

// jobsDialectOf returns the statements for db's database.
func jobsDialectOf(db bun.IDB) jobsDialect {
	if sqldb.IsPostgres(db) {
		return jobsPG{}
	}
	return jobsSQLite{}
}
