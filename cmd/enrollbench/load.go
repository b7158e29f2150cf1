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

// bulkLoad times loading what the enrollment job must write at the least,
// the fastest way the database has, each into its emptied table: the same
// enrollment rows, then a result row per CSV row (as the job's, under its
// id). (The job wrote into empty tables: so does the bulk load. A DELETE
// would leave the job's rows dead in the tables and their indexes.)
func bulkLoad(ctx context.Context, db *bun.DB, orgID int64, cfgID string, n int) (enroll, results time.Duration, err error) {
	cfg, err := models.ParseID("factor_config", cfgID)
	if err != nil {
		return 0, 0, err
	}
	ids := make([]int64, 0, n+1)
	rows, err := db.QueryContext(ctx, "SELECT id FROM users WHERE org_id = ? AND email LIKE 'user%' ORDER BY id", orgID)
	if err != nil {
		return 0, 0, err
	}
	for rows.Next() {
		var id int64
		if err = rows.Scan(&id); err != nil {
			return 0, 0, errors.Join(err, rows.Close())
		}
		ids = append(ids, id)
	}
	if err = errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, 0, err
	}
	if len(ids) != n {
		return 0, 0, fmt.Errorf("found %d users, want %d", len(ids), n)
	}
	var jobID int64
	if err = db.QueryRowContext(ctx, "SELECT id FROM jobs WHERE org_id = ?", orgID).Scan(&jobID); err != nil {
		return 0, 0, fmt.Errorf("the enrollment job: %w", err)
	}
	now := time.Now().UTC()
	enroll, err = timedLoad(ctx, db, "enrollments",
		[]string{"org_id", "user_id", "factor_config_id", "factor_type", "value", "job_id", "source_row", "updated_at"},
		n, func(i int) []any {
			return []any{orgID, ids[i-1], cfg, "SMS_OTP", fmt.Sprintf("+1415%07d", i), jobID, int64(i), now}
		})
	if err != nil {
		return 0, 0, err
	}
	results, err = timedLoad(ctx, db, "job_results", []string{"job_id", "seq", "entity_id", "status", "message"},
		n, func(i int) []any {
			return []any{jobID, int64(i), models.FormatID(ids[i-1]), "SUCCESS", ""}
		})
	return enroll, results, err
}

// timedLoad empties table and times loading rows 1..n into it: COPY on
// PostgreSQL, one prepared INSERT in one transaction on SQLite.
func timedLoad(ctx context.Context, db *bun.DB, table string, cols []string, n int, row func(int) []any) (time.Duration, error) {
	empty := "DELETE FROM " + table
	if sqldb.IsPostgres(db) {
		empty = "TRUNCATE " + table
	}
	if _, err := db.ExecContext(ctx, empty); err != nil {
		return 0, err
	}
	began := time.Now()
	var err error
	if sqldb.IsPostgres(db) {
		err = copyRows(ctx, db.DB, table, cols, n, row)
	} else {
		err = insertRows(ctx, db.DB, table, cols, n, row)
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
