package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// errUnavailable is the EUNAVAILABLE error of a store that could not do its
// work for a reason that passes by itself: the database is down, restarting,
// failing over, out of connections, or it cancelled the statement or the
// transaction (timeout, serialization failure, deadlock). The request may be
// repeated as it is.
var errUnavailable = Error{Code: EUNAVAILABLE, Title: "Service Unavailable",
	Detail: "the database is unavailable for a moment; retry after the time in Retry-After"}

// IsUnavailable reports whether err means "could not be done now, try again"
// rather than "wrong" or "broken": an EUNAVAILABLE *Error, or a store error
// that is a lost or refused connection, a failover or shutdown, a statement
// timeout, too many connections, a serialization failure or deadlock, or a
// busy or locked SQLite database. Such an error is answered 503 with
// Retry-After, never 401 or 500.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var me *Error
	if errors.As(err, &me) {
		return me.Code == EUNAVAILABLE
	}
	return IsTransient(err)
}

// isTransient classifies driver and network errors; see IsUnavailable.
func IsTransient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"57014", // query_canceled (statement_timeout)
			"57P01", // admin_shutdown
			"57P02", // crash_shutdown
			"57P03", // cannot_connect_now (starting up, shutting down)
			"53300": // too_many_connections
			return true
		}
		return len(pgErr.Code) == 5 && pgErr.Code[:2] == "08" // connection exception
	}
	var sqliteErr *sqlite.Error
	if errors.As(err, &sqliteErr) {
		primary := sqliteErr.Code() & 0xff
		return primary == sqlite3.SQLITE_BUSY || primary == sqlite3.SQLITE_LOCKED
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr):
		return true
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// pgx's own "conn closed", "conn busy" and errors met before anything
	// was sent.
	return pgconn.SafeToRetry(err)
}

// unavailable returns errUnavailable wrapping err when err is transient, and
// err otherwise.
func Unavailable(err error) error {
	if err == nil || !IsTransient(err) {
		return err
	}
	var me *Error
	if errors.As(err, &me) {
		return err
	}
	return &unavailableError{cause: err}
}

// unavailableError is errUnavailable that keeps the store error behind it
// for the logs.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string { return errUnavailable.Error() + ": " + e.cause.Error() }

// As lets errors.As find an EUNAVAILABLE *Error in e.
func (e *unavailableError) As(target any) bool {
	if t, ok := target.(**Error); ok {
		cp := errUnavailable
		*t = &cp
		return true
	}
	return false
}

func (e *unavailableError) Unwrap() error { return e.cause }

// Retries of a transaction that failed for a transient reason and was rolled
// back: at most TxAttempts in all, waiting about txBackoff, then three times
// that, between them (with jitter), so that a failover or a restart a
// moment long goes unnoticed while an outage is answered within a second.
const TxAttempts = 3

var TxBackoff = 100 * time.Millisecond

// retryWait returns how long to wait before attempt n (1 is the first
// retry).
func RetryWait(n int) time.Duration {
	d := TxBackoff
	for range n - 1 {
		d *= 3
	}
	return d/2 + rand.N(d) //nolint:gosec // jitter of a retry's delay: nothing to predict
}

// sleepCtx waits d or until ctx ends; false when ctx ended.
func SleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// connectAttempts is how many times a new database connection is tried when
// the server refuses it for a transient reason (restarting, failing over,
// out of connections).
const ConnectAttempts = 2

// RetryConnector opens PostgreSQL connections, trying again after a moment
// when the server refuses one for a transient reason: nothing was sent yet,
// so any statement (a read outside a transaction too) is safe to send on
// the connection that follows. With database/sql's own retry of a statement
// whose pooled connection turns out dead before it was sent (driver
// ErrBadConn), this is the in-process retry of statements outside a
// transaction; InTx retries transactions.
type RetryConnector struct{ driver.Connector }

// Connect implements driver.Connector.
func (c RetryConnector) Connect(ctx context.Context) (driver.Conn, error) {
	for attempt := 1; ; attempt++ {
		conn, err := c.Connector.Connect(ctx)
		if err == nil || attempt >= ConnectAttempts || !IsTransient(err) || !SleepCtx(ctx, RetryWait(attempt)) {
			return conn, err
		}
	}
}
