package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"

	"iam/cmd/internal/benchrun"
	"iam/models"
	"iam/models/sqldb"
)

// seedUsers creates users user1..userN@example.com of org.
func seedUsers(ctx context.Context, db *bun.DB, orgID int64, n int) error {
	now := time.Now().UTC()
	cols := []string{"id", "org_id", "email", "created_at", "updated_at"}
	row := func(i int) []any {
		return []any{sqldb.NewID(), orgID, "user" + strconv.Itoa(i) + "@example.com", now, now}
	}
	if sqldb.IsPostgres(db) {
		return copyRows(ctx, db.DB, "users", cols, n, row)
	}
	return insertRows(ctx, db.DB, "users", cols, n, row)
}

// bulkLoad empties the enrollment table and times loading the same rows
// into it the fastest way the database has.
func bulkLoad(ctx context.Context, db *bun.DB, orgID int64, cfgID string, n int) (time.Duration, error) {
	cfg, err := models.ParseID("factor_config", cfgID)
	if err != nil {
		return 0, err
	}
	ids := make([]int64, 0, n+1)
	rows, err := db.QueryContext(ctx, "SELECT id FROM users WHERE org_id = ? AND email LIKE 'user%' ORDER BY id", orgID)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var id int64
		if err = rows.Scan(&id); err != nil {
			return 0, errors.Join(err, rows.Close())
		}
		ids = append(ids, id)
	}
	if err = errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	if len(ids) != n {
		return 0, fmt.Errorf("found %d users, want %d", len(ids), n)
	}
	// The job wrote into an empty table: so does the bulk load. (A DELETE
	// would leave the job's rows dead in the table and its indexes.)
	empty := "DELETE FROM enrollments"
	if sqldb.IsPostgres(db) {
		empty = "TRUNCATE enrollments"
	}
	if _, err = db.ExecContext(ctx, empty); err != nil {
		return 0, err
	}
	now := time.Now().UTC()
	cols := []string{"org_id", "user_id", "factor_config_id", "factor_type", "value", "job_id", "source_row", "updated_at"}
	row := func(i int) []any {
		return []any{orgID, ids[i-1], cfg, "SMS_OTP", fmt.Sprintf("+1415%07d", i), int64(1), int64(i), now}
	}
	began := time.Now()
	if sqldb.IsPostgres(db) {
		err = copyRows(ctx, db.DB, "enrollments", cols, n, row)
	} else {
		err = insertRows(ctx, db.DB, "enrollments", cols, n, row)
	}
	return time.Since(began), err
}

// copyRows loads rows 1..n with PostgreSQL's COPY.
func copyRows(ctx context.Context, db *sql.DB, table string, cols []string, n int, row func(int) []any) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, conn.Close) // back to the pool
	return conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		i := 0
		_, copyErr := pc.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromFunc(func() ([]any, error) {
			if i == n {
				return nil, nil
			}
			i++
			return row(i), nil
		}))
		return copyErr
	})
}

// insertRows loads rows 1..n with one prepared INSERT in one transaction.
func insertRows(ctx context.Context, db *sql.DB, table string, cols []string, n int, row func(int) []any) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { // after Commit, Rollback does nothing and says ErrTxDone
		if rbErr := tx.Rollback(); !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, rbErr)
		}
	}()
	q := "INSERT INTO " + table + " ("
	marks := ""
	for i, c := range cols {
		if i > 0 {
			q, marks = q+", ", marks+", "
		}
		q, marks = q+c, marks+"?"
	}
	stmt, err := tx.PrepareContext(ctx, q+") VALUES ("+marks+")")
	if err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		if _, err = stmt.ExecContext(ctx, row(i)...); err != nil {
			return err
		}
	}
	return tx.Commit()
}
