package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"iam/cmd/internal/benchrun"
	"iam/models/identity"
	"iam/models/sqldb"
)

// Seeded attribute spreads: users are spread evenly over departments and
// countries; every 10th user is inactive and every 5th unlicensed.
const departments = 50

var countries = []string{"DE", "FR", "US", "GB", "IN", "BR", "JP", "ES", "IT", "NL"}

// department is the department of the i-th seeded user.
func department(i int) string { return fmt.Sprintf("Dept-%02d", (i*7919)%departments) }

// seedUsers COPYs n users into org and analyzes the table.
func seedUsers(ctx context.Context, db *sql.DB, orgID int64, n int) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, conn.Close) // back to the pool
	cols := []string{"id", "org_id", "first_name", "last_name", "display_name", "email", "employee_id",
		"department", "title", "country", "status", "is_licensed", "created_at", "updated_at"}
	now := time.Now().UTC()
	err = conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		_, copyErr := pc.CopyFrom(ctx, pgx.Identifier{"users"}, cols, pgx.CopyFromFunc(func() func() ([]any, error) {
			i := 0
			return func() ([]any, error) {
				if i == n {
					return nil, nil
				}
				first, last := fmt.Sprintf("First%d", i%5000), fmt.Sprintf("Last%d", i/5000)
				row := []any{sqldb.NewID(), orgID, first, last, first + " " + last,
					fmt.Sprintf("user%07d@example.com", i), fmt.Sprintf("E%07d", i), department(i), "Engineer",
					countries[i%len(countries)], statusOf(i), i%5 != 0, now, now}
				i++
				return row, nil
			}
		}()))
		return copyErr
	})
	if err != nil {
		return fmt.Errorf("copy users: %w", err)
	}
	if _, err = db.ExecContext(ctx, "VACUUM (ANALYZE) users"); err != nil {
		return fmt.Errorf("vacuum users: %w", err)
	}
	return nil
}

func statusOf(i int) int {
	if i%10 == 9 {
		return identity.UserInactive
	}
	return identity.UserActive
}
