package devices

import (
	"context"
	"iam/models/sqldb"

	"github.com/uptrace/bun"
)

// devicesDialect is the SQL of devices and their agents that differs between PostgreSQL and SQLite
// (devices_dialect_pg.go, devices_dialect_sqlite.go), beside the shared primitives.
type devicesDialect interface {
	sqldb.Dialect
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
	// writeSyncBatch writes a sync batch's links (the accounts' state, their
	// commands and history entries), results and the job's progress in tx;
	// errSyncRace when an account of w.Links is no longer unlinked.
	writeSyncBatch(ctx context.Context, tx bun.Tx, w *syncWrite) error
	// recordCheckIn writes the checkinColumns of d and the
	// accountChangeColumns of the changed accounts.
	recordCheckIn(ctx context.Context, tx bun.Tx, d *Device, report bool, changed []*LocalAccount) error
}

type devicesPG struct{ sqldb.PGDialect }

type devicesSQLite struct{ sqldb.SQLiteDialect }

// devicesDialectOf returns the statements for db's database.
func devicesDialectOf(db bun.IDB) devicesDialect {
	if sqldb.IsPostgres(db) {
		return devicesPG{}
	}
	return devicesSQLite{}
}
