package devices

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

func (devicesPG) checkinRead() string { return pgCheckinRead }

const pgCheckinRead = `SELECT d.org_id, d.secret_hash, d.reported_digest, d.checkin_interval_seconds, d.uninstall_requested_at,
	c.id, c.type, c.args
FROM devices d LEFT JOIN device_commands c ON c.device_id = d.id AND c.status = 'pending'
WHERE d.id = $1 ORDER BY c.id`

// touchDevices writes the batch in one statement, its values as arrays.
func (devicesPG) touchDevices(ctx context.Context, db *bun.DB, batch []contactTouch) error {
	ids := make([]int64, len(batch))
	at := make([]time.Time, len(batch))
	inactive := make([]time.Time, len(batch))
	for i, t := range batch {
		ids[i], at[i], inactive[i] = t.id, t.at, t.inactive
	}
	_, err := db.DB.ExecContext(ctx, `UPDATE devices AS d SET last_contact_time = v.at, inactive_after = v.inactive
		FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS v(id, at, inactive)
		WHERE d.id = v.id AND (d.last_contact_time IS NULL OR d.last_contact_time < v.at)`, ids, at, inactive)
	return err
}

// pgSyncWrite is a sync batch's writes in one statement, its values as
// arrays: the links' accounts set pending_link (those still unlinked),
// which feeds their commands and history entries; the results; the job's
// progress. It answers the number of accounts linked. The command's args
// are those of syncLink.linkArgs.
const pgSyncWrite = `WITH l AS (
	SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[])
		AS l(account_id, device_id, user_id, command_id, event_id, user_name, device_name, lvl)
), linked AS (
	UPDATE device_accounts AS a SET link_status = $9, link_type = $10, idp_user_id = l.user_id, link_permission_level = l.lvl,
		link_command_id = l.command_id, linked_at = NULL, updated_at = $11
	FROM l WHERE a.id = l.account_id AND a.link_status = $12
	RETURNING l.*
), commands AS (
	INSERT INTO device_commands (id, org_id, device_id, account_id, type, args, status, message, created_at)
	SELECT command_id, $13, device_id, account_id, $14, jsonb_build_object('account_id', account_id::text, 'user_name', user_name,
		'idp_user_id', user_id::text, 'permission_level', lvl), $15, '', $11
	FROM linked
), history AS (
	INSERT INTO device_link_history (id, org_id, device_id, device_name, account_id, user_name, idp_user_id, action, link_type,
		old_state, new_state, reason, actor, job_id, created_at)
	SELECT event_id, $13, device_id, device_name, account_id, user_name, user_id, 'link', $10, $12, $9, '', $16, $17, $11
	FROM linked
), results AS (
	INSERT INTO job_results (job_id, seq, entity_id, status, message)
	SELECT $17, $18 + r.n - 1, r.entity_id, r.status, r.message
	FROM unnest($19::text[], $20::text[], $21::text[]) WITH ORDINALITY AS r(entity_id, status, message, n)
), progress AS (
	UPDATE jobs SET processed = $22, total = $23, success_count = $24, error_count = $25, updated_at = $11 WHERE id = $17
)
SELECT count(*) FROM linked`

// writeSyncBatch is one statement (pgSyncWrite), one round trip.
func (devicesPG) writeSyncBatch(ctx context.Context, tx bun.Tx, w *syncWrite) error {
	n := len(w.Links)
	accounts, devices, users, commands, events := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	names, deviceNames, levels := make([]string, n), make([]string, n), make([]string, n)
	for i := range w.Links {
		l := &w.Links[i]
		accounts[i], devices[i], users[i], commands[i], events[i] = l.AccountID, l.DeviceID, l.UserID, l.CommandID, l.EventID
		names[i], deviceNames[i], levels[i] = l.UserName, l.DeviceName, l.Level
	}
	m := len(w.Results)
	entities, statuses, messages := make([]string, m), make([]string, m), make([]string, m)
	var first int64
	for i := range w.Results {
		r := &w.Results[i]
		if i == 0 {
			first = r.Seq
		} else if r.Seq != first+int64(i) {
			return fmt.Errorf("record job results: seqs %d and %d are not consecutive", first, r.Seq)
		}
		entities[i], statuses[i], messages[i] = r.EntityID, r.Status, r.Message
	}
	p := w.Progress
	var linked int
	if err := tx.Tx.QueryRowContext(ctx, pgSyncWrite,
		accounts, devices, users, commands, events, names, deviceNames, levels,
		LinkPending, LinkAutomatic, w.Now, LinkUnlinked, w.OrgID, CmdLink, CommandPending, SyncActor, w.JobID, first,
		entities, statuses, messages, p.Processed, p.Total, p.Success, p.Failed).Scan(&linked); err != nil {
		// A unique violation (a user linked meanwhile on one of the
		// devices, which the devices' locks rule out) is no domain
		// error: the batch is retried and sees the link.
		return fmt.Errorf("write the sync batch: %w", err)
	}
	if linked != n {
		return errSyncRace
	}
	return nil
}
