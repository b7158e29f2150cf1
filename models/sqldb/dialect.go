package sqldb

import (
	"context"
	"sync"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// Dialect holds the primitives whose SQL differs between PostgreSQL and
// SQLite, one file per dialect (dialect_pg.go, dialect_sqlite.go). An
// area's own dialect-specific statements live in the area, in an interface
// that embeds this one, never as a branch on the database's name. Helpers
// that hold only a bun.IDB ask DialectOf.
type Dialect interface {
	// LockRows makes q lock the rows it reads until the transaction ends,
	// with PostgreSQL's strength ("UPDATE", "NO KEY UPDATE"). A SQLite
	// write transaction holds the whole database, so q stays as it is.
	LockRows(q *bun.SelectQuery, strength string) *bun.SelectQuery
	// clockMillis is the database's clock in Unix milliseconds, as SQL.
	clockMillis() string
	// InsertBlobChunk is the statement inserting (blob_id, seq, data) with
	// the driver's own placeholders.
	InsertBlobChunk() string
	// migrationTypes are the column types the migrations are rendered with.
	migrationTypes() sqlTypes
	// QueueWrites takes mu when the database has one writer (SQLite), so
	// that the process's writers queue here rather than in the database's
	// busy handler; it returns the unlock.
	QueueWrites(mu *sync.Mutex) (unlock func())

	// EmailLocalPart is the SQL of the part of the email column col before
	// its '@' (the whole value when it has none).
	EmailLocalPart(col string) string

	// insertAuditEvents inserts org's events of the transaction, numbered
	// (SQLite) or to be numbered by numberAuditEvents (audit.go).
	insertAuditEvents(ctx context.Context, tx bun.Tx, org int64, evs []unnumbered) error
	// numberAuditEvents numbers org's committed events that have no number
	// and returns its last number.
	numberAuditEvents(ctx context.Context, db bun.IDB, org int64) (int64, error)
	// pendingAuditOrgs returns the organizations that have committed
	// events without a number, in id order.
	pendingAuditOrgs(ctx context.Context, db bun.IDB) ([]int64, error)
}

// DialectOf returns the statements for db's database.
func DialectOf(db bun.IDB) Dialect {
	if db.Dialect().Name() == dialect.PG {
		return PGDialect{}
	}
	return SQLiteDialect{}
}

// IsPostgres reports whether db speaks PostgreSQL. Store code asks its
// Dialect instead; this is for tests and benchmark programs.
func IsPostgres(db bun.IDB) bool {
	return db.Dialect().Name() == dialect.PG
}
