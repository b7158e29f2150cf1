package enrollment

import (
	"context"
	"database/sql"
	"fmt"
	"iam/models"
	"iam/models/jobs"
	"iam/models/sqldb"

	"github.com/uptrace/bun"
)

// enrollmentDialect is the SQL of enrollment that differs between PostgreSQL and SQLite
// (enrollment_dialect_pg.go, enrollment_dialect_sqlite.go), beside the shared primitives.
type enrollmentDialect interface {
	sqldb.Dialect
	// matchUsers is EnrollmentStore.MatchUsers for non-empty values.
	matchUsers(ctx context.Context, db *bun.DB, orgID int64, key UserKey, values []string) (map[string]int64, error)
	// applyEnrollChunk is EnrollmentStore.ApplyChunk, in a transaction of
	// its own.
	applyEnrollChunk(ctx context.Context, db *bun.DB, c *EnrollChunk) (jobs.JobProgress, error)
}

type enrollmentPG struct{ sqldb.PGDialect }

type enrollmentSQLite struct{ sqldb.SQLiteDialect }

// enrollmentDialectOf returns the statements for db's database.
func enrollmentDialectOf(db bun.IDB) enrollmentDialect {
	if sqldb.IsPostgres(db) {
		return enrollmentPG{}
	}
	return enrollmentSQLite{}
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
		return "", models.Invalid("user_key", "unknown user key %q", key)
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
