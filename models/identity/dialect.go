package identity

import (
	"context"
	"iam/models/sqldb"

	"github.com/uptrace/bun"
)

// usersDialect is the SQL of users that differs between PostgreSQL and SQLite
// (users_dialect_pg.go, users_dialect_sqlite.go), beside the shared primitives.
type usersDialect interface {
	sqldb.Dialect
	// lockManagerChanges makes the organization's manager changes in tx
	// take turns.
	lockManagerChanges(ctx context.Context, tx bun.Tx, orgID int64) error
}

type usersPG struct{ sqldb.PGDialect }

type usersSQLite struct{ sqldb.SQLiteDialect }

// usersDialectOf returns the statements for db's database.
func usersDialectOf(db bun.IDB) usersDialect {
	if sqldb.IsPostgres(db) {
		return usersPG{}
	}
	return usersSQLite{}
}
