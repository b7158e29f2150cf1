package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/schema"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Open connects to the database named by dsn and checks that it answers.
//
// A dsn that starts with postgres:// or postgresql:// opens PostgreSQL through
// pgx; one that starts with sqlite: or file: opens a SQLite file through the
// pure-Go driver (sqlite:./data/iam.db). The SQLite file's folder is created
// when missing. Open returns EINVALID for any other form.
func Open(ctx context.Context, dsn string) (*bun.DB, error) {
	var db *bun.DB
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, models.Errorf(models.EINVALID, "database url: %v", err)
		}
		sqldb := sql.OpenDB(retryConnector{Connector: stdlib.GetConnector(*cfg)})
		sqldb.SetMaxOpenConns(32)
		sqldb.SetMaxIdleConns(32)
		sqldb.SetConnMaxIdleTime(5 * time.Minute)
		db = bun.NewDB(sqldb, pgdialect.New())
	case strings.HasPrefix(dsn, "sqlite:"), strings.HasPrefix(dsn, "file:"):
		path, err := sqliteDSN(dsn)
		if err != nil {
			return nil, err
		}
		sqldb, err := sql.Open("sqlite", path)
		if err != nil {
			return nil, models.Errorf(models.EINVALID, "database url: %v", err)
		}
		// One writer at a time is SQLite's model; a small pool lets readers run
		// beside it in WAL mode while busy_timeout queues the writers.
		sqldb.SetMaxOpenConns(4)
		db = bun.NewDB(sqldb, sqlitedialect.New())
	default:
		return nil, models.Errorf(models.EINVALID, "database url must start with postgres://, postgresql://, sqlite: or file:")
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		return nil, errors.Join(fmt.Errorf("connect to database: %w", err), db.Close())
	}
	return db, nil
}

// sqliteDSN turns sqlite:PATH[?query] into the driver's file: form with the
// pragmas the service relies on: WAL, a busy timeout, foreign keys, and
// immediate write transactions (a deferred one that upgrades to a write can
// fail at once with SQLITE_BUSY instead of waiting).
func sqliteDSN(dsn string) (string, error) {
	rest := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "file:")
	path, rawQuery, _ := strings.Cut(rest, "?")
	if path == "" {
		return "", models.Errorf(models.EINVALID, "sqlite database url needs a file path")
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", models.Errorf(models.EINVALID, "sqlite database url: %v", err)
	}
	if path != ":memory:" && !strings.HasPrefix(path, ":memory:") {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return "", fmt.Errorf("create database folder: %w", err)
		}
	}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	q.Set("_time_format", "sqlite")
	// The driver hands SQLite a URI: escape what would end or mangle its path
	// (a test's temporary folder can hold '#').
	uriPath := strings.NewReplacer("%", "%25", "#", "%23").Replace(path)
	return "file:" + uriPath + "?" + q.Encode(), nil
}

// IsUniqueViolation reports whether err is a unique-constraint violation on
// either dialect.
func IsUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505"
	}
	var sqliteErr *sqlite.Error
	if errors.As(err, &sqliteErr) {
		code := sqliteErr.Code()
		return code == sqlite3.SQLITE_CONSTRAINT_UNIQUE || code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// InTx runs fn in a transaction on db, or inside the caller's transaction when
// db already is one. It is the one place every change passes through: the
// audit events fn records (models.Record, with fn's ctx) are written in the
// same transaction, just before it commits. The one transaction that does
// not run here is the OAuth server's token transaction: its library
// (fosite) begins it, writes through its storage and commits it in separate
// calls, so it cannot be one fn; it writes its events with
// CommitWithEvents.
//
// A transaction of its own that fails for a transient reason (see
// IsUnavailable) was rolled back, and runs again: up to TxAttempts in all,
// while ctx lasts. So fn must do nothing but database work (InTxOnce is for
// the others) and must set what it hands back afresh on every run. A commit
// that fails is not run again (it may have happened), unless the database
// says it rolled back (a serialization failure or deadlock). A transient
// error that remains is returned as EUNAVAILABLE.
func InTx(ctx context.Context, db bun.IDB, fn func(ctx context.Context, tx bun.Tx) error) error {
	if tx, ok := db.(bun.Tx); ok {
		return fn(ctx, tx)
	}
	for attempt := 1; ; attempt++ {
		again, err := runTx(ctx, db, fn)
		if err == nil || !again || attempt >= txAttempts || ctx.Err() != nil || !sleepCtx(ctx, retryWait(attempt)) {
			return models.Unavailable(err)
		}
	}
}

// InTxOnce is InTx without the retries, for an fn that does more than
// database work (reads a request body, changes another system): a transient
// error is returned as EUNAVAILABLE at once.
func InTxOnce(ctx context.Context, db bun.IDB, fn func(ctx context.Context, tx bun.Tx) error) error {
	if tx, ok := db.(bun.Tx); ok {
		return fn(ctx, tx)
	}
	_, err := runTx(ctx, db, fn)
	return models.Unavailable(err)
}

// CommitWithEvents writes events in tx and commits it, as InTx does at the
// end of its transactions; on a failure to write them it rolls tx back. It
// is for the one transaction InTx cannot run: the OAuth server's token
// transaction, which its library (fosite) begins, writes through its
// storage and commits in steps of its own (storage.Transactional's
// BeginTX, Commit and Rollback), so that it is no fn of InTx. That
// transaction's writes record their events into a models.PendingEvents
// (models.WithPendingEvents on the context the storage keeps) and its
// commit passes them here: the tokens and their events still commit
// together. It is not run again on a transient error (the writes were
// fosite's steps, not an fn to run again): a transient error is returned
// as EUNAVAILABLE, which the token endpoint answers 503 for the client to
// retry. Every other change goes through InTx.
func CommitWithEvents(ctx context.Context, tx bun.Tx, events []models.AuditEvent) error {
	_, err := commitEvents(ctx, tx, events)
	if err != nil {
		_ = tx.Rollback() // a no-op after a failed commit
	}
	return models.Unavailable(err)
}

// runTx runs fn in a transaction begun on db and commits it with the
// events fn recorded: no change commits without them, none is written
// without it. A transaction that fails is rolled back. again says that err
// is transient and the transaction certainly did not commit.
func runTx(ctx context.Context, db bun.IDB, fn func(ctx context.Context, tx bun.Tx) error) (again bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return models.IsTransient(err), err
	}
	txCtx, pending := models.WithPendingEvents(ctx)
	if err = fn(txCtx, tx); err != nil {
		_ = tx.Rollback()
		return models.IsTransient(err), err
	}
	if again, err = commitEvents(ctx, tx, pending.Events()); err != nil {
		_ = tx.Rollback() // a no-op after a failed commit
	}
	return again, err
}

// commitEvents writes the events in tx, then commits it; again as runTx's.
func commitEvents(ctx context.Context, tx bun.Tx, events []models.AuditEvent) (again bool, err error) {
	if err := writeEvents(ctx, tx, events); err != nil {
		return models.IsTransient(err), err
	}
	return commitTx(tx)
}

// commitTx commits tx. again says that the commit failed and the database
// says it rolled back (a serialization failure or deadlock): a commit that
// fails otherwise may have happened.
func commitTx(tx bun.Tx) (again bool, err error) {
	if err := tx.Commit(); err != nil {
		return commitRolledBack(err), err
	}
	return false, nil
}

// commitRolledBack reports whether a failed COMMIT's err says that the
// transaction rolled back for a reason worth running it again for.
func commitRolledBack(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

var _ = stdlib.GetDefaultDriver // registers the "pgx" driver
var _ schema.Dialect = pgdialect.New()
