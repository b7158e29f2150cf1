package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

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

// IsTransient classifies driver and network errors; see IsUnavailable.
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

// Unavailable returns errUnavailable wrapping err when err is transient, and
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
