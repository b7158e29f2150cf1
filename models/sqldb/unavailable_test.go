package sqldb_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/sqldb"
	"iam/models/store"
)

// Errors that pass by themselves are told from the others.
func TestIsUnavailable_ClassifiesStoreErrors(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("select user: %w", &pgconn.PgError{Code: code}) }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection exception 08006", pg("08006"), true},
		{"connection refused 08001", pg("08001"), true},
		{"serialization failure", pg("40001"), true},
		{"deadlock", pg("40P01"), true},
		{"statement timeout", pg("57014"), true},
		{"admin shutdown", pg("57P01"), true},
		{"crash shutdown", pg("57P02"), true},
		{"cannot connect now", pg("57P03"), true},
		{"too many connections", pg("53300"), true},
		{"unique violation", pg("23505"), false},
		{"syntax error", pg("42601"), false},
		{"bad connection", fmt.Errorf("query: %w", driver.ErrBadConn), true},
		{"connection done", sql.ErrConnDone, true},
		{"dropped connection", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"network error", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"connection reset", fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{"deadline", context.DeadlineExceeded, true},
		{"EUNAVAILABLE", &models.Error{Code: models.EUNAVAILABLE}, true},
		{"no rows", sql.ErrNoRows, false},
		{"not found", models.NotFound("User", "no such user"), false},
		{"bad credentials", identity.ErrBadCredentials, false},
		{"cancelled by the client", context.Canceled, false},
		{"anything else", errors.New("boom"), false},
		{"nil", nil, false},
	} {
		if got := models.IsUnavailable(tc.err); got != tc.want {
			t.Errorf("%s: IsUnavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
		if tc.err != nil && tc.want != (models.ErrorCode(tc.err) == models.EUNAVAILABLE) {
			t.Errorf("%s: ErrorCode(%v) = %s", tc.name, tc.err, models.ErrorCode(tc.err))
		}
	}
}

// A store whose PostgreSQL server refuses connections answers EUNAVAILABLE.
func TestIsUnavailable_RefusedConnection(t *testing.T) {
	sqldb, err := sql.Open("pgx", "postgres://iam@127.0.0.1:1/iam?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	db := bun.NewDB(sqldb, pgdialect.New())
	defer func() {
		if cerr := db.Close(); cerr != nil {
			t.Error(cerr)
		}
	}()
	_, err = store.NewStore(db).Users.Get(context.Background(), 1, 2)
	if !models.IsUnavailable(err) || models.ErrorCode(err) != models.EUNAVAILABLE {
		t.Errorf("reading from a server that refuses connections: %v (code %s), want EUNAVAILABLE", err, models.ErrorCode(err))
	}
	_, err = store.NewStore(db).Users.Authenticate(context.Background(), 1, "a@example.com", "password", identity.AccountBlockingSettings{}, time.Now())
	if !models.IsUnavailable(err) {
		t.Errorf("signing in against a server that refuses connections: %v, want EUNAVAILABLE", err)
	}
}

// A SQLite database another connection holds for writing is busy: EUNAVAILABLE.
func TestIsUnavailable_SQLiteBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	a, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cerr := a.Close(); cerr != nil {
			t.Error(cerr)
		}
	}()
	b, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cerr := b.Close(); cerr != nil {
			t.Error(cerr)
		}
	}()
	ctx := context.Background()
	if _, err = a.ExecContext(ctx, "CREATE TABLE t (n INTEGER)"); err != nil {
		t.Fatal(err)
	}
	conn, err := a.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cerr := conn.Close(); cerr != nil {
			t.Error(cerr)
		}
	}()
	if _, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "ROLLBACK") //nolint:errcheck
	_, err = b.ExecContext(ctx, "INSERT INTO t VALUES (1)")
	if err == nil || !models.IsUnavailable(err) {
		t.Errorf("a write while another connection writes: %v, want a busy error that IsUnavailable", err)
	}
}

// A transaction that failed for a transient reason was rolled back and runs
// again, a bounded number of times; other failures are not repeated, nor is
// a transaction of InTxOnce.
func TestInTx_RetriesRolledBackTransientFailures(t *testing.T) {
	defer sqldb.ShortTxBackoff()()
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		if _, err := db.ExecContext(ctx, "CREATE TABLE retry_probe (n INTEGER)"); err != nil {
			t.Fatal(err)
		}
		count := func() int {
			var n int
			if err := db.NewRaw("SELECT count(*) FROM retry_probe").Scan(ctx, &n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		serialization := &pgconn.PgError{Code: "40001"}
		// fails fails the first runs with err, after inserting a row.
		run := func(helper func(context.Context, bun.IDB, func(context.Context, bun.Tx) error) error, fails int, err error) (int, error) {
			runs := 0
			got := helper(ctx, db, func(ctx context.Context, tx bun.Tx) error {
				runs++
				if _, execErr := tx.ExecContext(ctx, "INSERT INTO retry_probe (n) VALUES (?)", runs); execErr != nil {
					return execErr
				}
				if runs <= fails {
					return fmt.Errorf("update: %w", err)
				}
				return nil
			})
			return runs, got
		}

		runs, err := run(sqldb.InTx, 1, serialization)
		if err != nil || runs != 2 || count() != 1 {
			t.Errorf("a serialization failure once: %d runs, error %v, %d rows; want 2 runs, no error, 1 row", runs, err, count())
		}
		runs, err = run(sqldb.InTx, 100, serialization)
		if runs != sqldb.TxAttempts || models.ErrorCode(err) != models.EUNAVAILABLE || !errors.Is(err, serialization) || count() != 1 {
			t.Errorf("a serialization failure every time: %d runs, error %v (%s), %d rows; want %d runs, EUNAVAILABLE wrapping it, 1 row",
				runs, err, models.ErrorCode(err), count(), sqldb.TxAttempts)
		}
		notFound := models.NotFound("User", "no such user")
		runs, err = run(sqldb.InTx, 1, notFound)
		if runs != 1 || models.ErrorCode(err) != models.ENOTFOUND || count() != 1 {
			t.Errorf("a not-found error: %d runs, error %v, %d rows; want 1 run, ENOTFOUND, 1 row", runs, err, count())
		}
		runs, err = run(sqldb.InTxOnce, 1, serialization)
		if runs != 1 || models.ErrorCode(err) != models.EUNAVAILABLE || count() != 1 {
			t.Errorf("InTxOnce with a serialization failure: %d runs, error %v, %d rows; want 1 run, EUNAVAILABLE, 1 row", runs, err, count())
		}
	})
}

// stubConnector fails its first connections with err.
type stubConnector struct {
	fails, tries int
	err          error
}

func (c *stubConnector) Connect(context.Context) (driver.Conn, error) {
	c.tries++
	if c.tries <= c.fails {
		return nil, c.err
	}
	return nil, nil
}

func (c *stubConnector) Driver() driver.Driver { return nil }

// A connection the server refused for a transient reason is tried again,
// a bounded number of times; one refused for another reason is not.
func TestRetryConnector_TriesRefusedConnectionsAgain(t *testing.T) {
	defer sqldb.ShortTxBackoff()()
	ctx := context.Background()
	starting := &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}
	for _, tc := range []struct {
		name        string
		fails       int
		err         error
		tries       int
		wantSuccess bool
	}{
		{"starting up once", 1, starting, 2, true},
		{"refused every time", 100, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, sqldb.ConnectAttempts, false},
		{"bad password", 100, &pgconn.PgError{Code: "28P01"}, 1, false},
	} {
		stub := &stubConnector{fails: tc.fails, err: tc.err}
		_, err := sqldb.RetryConnector(stub).Connect(ctx)
		if stub.tries != tc.tries || (err == nil) != tc.wantSuccess {
			t.Errorf("%s: %d tries, error %v; want %d tries, success %v", tc.name, stub.tries, err, tc.tries, tc.wantSuccess)
		}
	}
}
