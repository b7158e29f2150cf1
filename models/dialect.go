package models

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// sqlDialect holds every statement that is not the same SQL on PostgreSQL
// and SQLite, one file per dialect (dialect_pg.go, dialect_sqlite.go). New
// areas add their dialect-specific SQL here, never as a branch on the
// database's name. NewStore picks the store's; helpers that hold only a
// bun.IDB ask dialectOf.
type sqlDialect interface {
	// lockRows makes q lock the rows it reads until the transaction ends,
	// with PostgreSQL's strength ("UPDATE", "NO KEY UPDATE"). A SQLite
	// write transaction holds the whole database, so q stays as it is.
	lockRows(q *bun.SelectQuery, strength string) *bun.SelectQuery
	// lockManagerChanges makes the organization's manager changes in tx
	// take turns.
	lockManagerChanges(ctx context.Context, tx bun.Tx, orgID int64) error
	// clockMillis is the database's clock in Unix milliseconds, as SQL.
	clockMillis() string
	// insertBlobChunk is the statement inserting (blob_id, seq, data) with
	// the driver's own placeholders.
	insertBlobChunk() string
	// migrationTypes are the column types the migrations are rendered with.
	migrationTypes() sqlTypes
	// queueWrites takes mu when the database has one writer (SQLite), so
	// that the process's writers queue here rather than in the database's
	// busy handler; it returns the unlock.
	queueWrites(mu *sync.Mutex) (unlock func())

	// checkinRead is the statement of DeviceStore.AuthenticateCheckIn, with
	// the driver's own placeholders (bound, so that the driver prepares it
	// once per connection): a device's org_id, secret_hash,
	// reported_digest, checkin_interval_seconds and uninstall_requested_at
	// for each of its pending commands' id, type and args, oldest first
	// (one row with null command columns when it has none).
	checkinRead() string
	// touchDevices writes the contact times of unchanged check-ins (in id
	// order), never moving a device's last_contact_time back.
	touchDevices(ctx context.Context, db *bun.DB, batch []contactTouch) error

	// matchUsers is EnrollmentStore.MatchUsers for non-empty values.
	matchUsers(ctx context.Context, db *bun.DB, orgID int64, key UserKey, values []string) (map[string]int64, error)
	// recordChunk is JobStore.RecordChunk, in a transaction of its own.
	recordChunk(ctx context.Context, db *bun.DB, orgID, id int64, results []JobResult, p JobProgress) error
	// applyEnrollChunk is EnrollmentStore.ApplyChunk, in a transaction of
	// its own.
	applyEnrollChunk(ctx context.Context, db *bun.DB, c *EnrollChunk) (JobProgress, error)

	// writeSyncBatch writes a sync batch's links (the accounts' state, their
	// commands and history entries), results and the job's progress in tx;
	// errSyncRace when an account of w.Links is no longer unlinked.
	writeSyncBatch(ctx context.Context, tx bun.Tx, w *syncWrite) error

	// emailLocalPart is the SQL of the part of the email column col before
	// its '@' (the whole value when it has none).
	emailLocalPart(col string) string
}

// dialectOf returns the statements for db's database.
func dialectOf(db bun.IDB) sqlDialect {
	if db.Dialect().Name() == dialect.PG {
		return pgDialect{}
	}
	return sqliteDialect{}
}

// IsPostgres reports whether db speaks PostgreSQL. Store code asks its
// sqlDialect instead; this is for tests and benchmark programs.
func IsPostgres(db bun.IDB) bool {
	return db.Dialect().Name() == dialect.PG
}

// userKeyProbe is the condition a users row (columns prefixed with prefix)
// meets when its key attribute equals value, an SQL expression; an empty
// attribute never matches. EINVALID for an unknown key.
func userKeyProbe(key UserKey, prefix, value string) (string, error) {
	var col, cmp string
	switch key {
	case KeyPrimaryEmail:
		col = prefix + "email"
		cmp = "lower(" + col + ")"
	case KeyEmployeeID:
		col = prefix + "employee_id"
		cmp = col
	case KeyMobileNumber:
		col = prefix + "mobile_number"
		cmp = col
	default:
		return "", Invalid("user_key", "unknown user key %q", key)
	}
	return col + " <> '' AND " + cmp + " = " + value, nil
}

// matchedUsers collects the (value, user id) rows of a matchUsers query
// into a map, keeping the oldest (smallest) id of a value several users
// share.
func matchedUsers(rows *sql.Rows, err error) (map[string]int64, error) {
	if err != nil {
		return nil, fmt.Errorf("match users: %w", err)
	}
	defer func() { _ = rows.Close() }() // rows.Err reports the read's errors
	out := make(map[string]int64)
	for rows.Next() {
		var k string
		var id int64
		if err := rows.Scan(&k, &id); err != nil {
			return nil, fmt.Errorf("match users: %w", err)
		}
		if prev, seen := out[k]; !seen || id < prev {
			out[k] = id
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("match users: %w", err)
	}
	return out, nil
}
