package devices

import (
	"context"
	"iam/models/sqldb"

	"github.com/uptrace/bun"
)

func (devicesSQLite) checkinRead() string { return sqliteCheckinRead }

const sqliteCheckinRead = `SELECT d.org_id, d.secret_hash, d.reported_digest, d.checkin_interval_seconds, d.uninstall_requested_at,
	c.id, c.type, c.args
FROM devices d LEFT JOIN device_commands c ON c.device_id = d.id AND c.status = 'pending'
WHERE d.id = ? ORDER BY c.id`

// touchDevices writes the batch in one transaction, a statement a device.
// One process (iam dev) writes a SQLite file, so a later contact time in
// the row is one this process wrote within the same ContactFlushInterval
// (a check-in that changed something, an uninstall's ack): the batch may
// move it back by less than that interval, which is the precision of the
// batched times anyway. (Stored as text, times do not compare in SQL here
// the way PostgreSQL's do.)
func (devicesSQLite) touchDevices(ctx context.Context, db *bun.DB, batch []contactTouch) error {
	return sqldb.InTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		for _, t := range batch {
			if _, err := tx.NewUpdate().Table("devices").Set("last_contact_time = ?", t.at).
				Set("inactive_after = ?", t.inactive).Where("id = ?", t.id).Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeSyncBatch writes a statement per kind of row (an UPDATE per link).
func (devicesSQLite) writeSyncBatch(ctx context.Context, tx bun.Tx, w *syncWrite) error {
	return writeSyncBatchRows(ctx, tx, w)
}
