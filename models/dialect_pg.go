package models

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
)

// pgDialect is PostgreSQL's SQL. The bulk paths of chunked jobs talk to
// pgx directly: array parameters and COPY travel in the binary protocol,
// where bun would format every value of a many-thousand-row statement into
// its SQL text.
type pgDialect struct{}

func (pgDialect) lockRows(q *bun.SelectQuery, strength string) *bun.SelectQuery {
	return q.For(strength)
}

func (pgDialect) lockManagerChanges(ctx context.Context, tx bun.Tx, orgID int64) error {
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?, ?)", managerLockSpace, int32(orgID)); err != nil { //nolint:gosec // the lock key is the id's low 32 bits: two organizations sharing one only wait for each other
		return fmt.Errorf("lock manager changes: %w", err)
	}
	return nil
}

func (pgDialect) clockMillis() string {
	return "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
}

func (pgDialect) insertBlobChunk() string {
	return "INSERT INTO blob_chunks (blob_id, seq, data) VALUES ($1, $2, $3)"
}

func (pgDialect) checkinRead() string { return pgCheckinRead }

const pgCheckinRead = `SELECT d.org_id, d.secret_hash, d.reported_digest, d.checkin_interval_seconds, d.uninstall_requested_at,
	c.id, c.type, c.args
FROM devices d LEFT JOIN device_commands c ON c.device_id = d.id AND c.status = 'pending'
WHERE d.id = $1 ORDER BY c.id`

// touchDevices writes the batch in one statement, its values as arrays.
func (pgDialect) touchDevices(ctx context.Context, db *bun.DB, batch []contactTouch) error {
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

func (pgDialect) migrationTypes() sqlTypes {
	return sqlTypes{Postgres: true, Time: "TIMESTAMPTZ", Blob: "BYTEA", JSON: "JSONB"}
}

func (pgDialect) queueWrites(*sync.Mutex) func() { return func() {} }

func (pgDialect) recordChunk(ctx context.Context, db *bun.DB, orgID, id int64, results []JobResult, p JobProgress) error {
	return withPgxTx(ctx, db, func(tx pgx.Tx) error {
		return recordChunkPG(ctx, tx, orgID, id, results, p)
	})
}

// withPgxTx runs fn in a transaction on a pgx connection taken from db's
// pool, committing when fn returns nil.
func withPgxTx(ctx context.Context, db *bun.DB, fn func(tx pgx.Tx) error) error {
	conn, err := db.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("take a connection: %w", err)
	}
	defer func() { _ = conn.Close() }() // returns it to the pool
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the PostgreSQL driver is %T, not pgx", dc)
		}
		return pgx.BeginFunc(ctx, sc.Conn(), fn)
	})
}

// recordChunkPG is JobStore.RecordChunk inside a pgx transaction: the
// job's absolute progress (which also locks the job's row, so that two
// attempts at the same chunk take turns), then the results: the rows of
// their seqs deleted and the new ones copied in, which leaves what an upsert
// by (job, seq) would, without a statement that names every value.
func recordChunkPG(ctx context.Context, tx pgx.Tx, orgID, id int64, results []JobResult, p JobProgress) error {
	tag, err := tx.Exec(ctx, `UPDATE jobs SET processed = $1, total = $2, success_count = $3, error_count = $4, updated_at = $5
		WHERE org_id = $6 AND id = $7 AND status = $8`,
		p.Processed, p.Total, p.Success, p.Failed, time.Now().UTC(), orgID, id, string(JobRunning))
	if err != nil {
		return fmt.Errorf("record job progress: %w", err)
	}
	if tag.RowsAffected() == 0 {
		var status string
		err = tx.QueryRow(ctx, `SELECT status FROM jobs WHERE org_id = $1 AND id = $2`, orgID, id).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrJobNotFound
		}
		if err != nil {
			return fmt.Errorf("read job status: %w", err)
		}
		return Errorf(ECONFLICT, "the job is %s, not RUNNING", status)
	}
	if len(results) == 0 {
		return nil
	}
	first, last, consecutive := results[0].Seq, results[len(results)-1].Seq, true
	for i := range results {
		results[i].JobID = id
		if results[i].Seq != first+int64(i) {
			consecutive = false
		}
	}
	if consecutive {
		_, err = tx.Exec(ctx, `DELETE FROM job_results WHERE job_id = $1 AND seq BETWEEN $2 AND $3`, id, first, last)
	} else {
		seqs := make([]int64, len(results))
		for i := range results {
			seqs[i] = results[i].Seq
		}
		_, err = tx.Exec(ctx, `DELETE FROM job_results WHERE job_id = $1 AND seq = ANY($2)`, id, seqs)
	}
	if err != nil {
		return fmt.Errorf("replace job results: %w", err)
	}
	i := 0
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"job_results"}, []string{"job_id", "seq", "entity_id", "status", "message"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == len(results) {
				return nil, nil
			}
			r := &results[i]
			i++
			return []any{r.JobID, r.Seq, r.EntityID, r.Status, r.Message}, nil
		}))
	if err != nil {
		return fmt.Errorf("record job results: %w", err)
	}
	return nil
}

// upsertEnrollmentsPG is the chunk's upsert on PostgreSQL: the enrollments
// as one array per column, unnested into one INSERT … ON CONFLICT. Rows go
// in (user, factor config) order, so that two transactions writing the same
// users lock them in the same order.
const upsertEnrollmentsPG = `INSERT INTO enrollments AS e
	(org_id, user_id, factor_config_id, factor_type, value, secret, thumbprint, expires_at, job_id, source_row, updated_at)
SELECT $1, w.user_id, w.factor_config_id, w.factor_type, w.value, w.secret, w.thumbprint, w.expires_at, $2, w.source_row, $3
FROM unnest($4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::bytea[], $9::text[], $10::timestamptz[], $11::bigint[])
	AS w(user_id, factor_config_id, factor_type, value, secret, thumbprint, expires_at, source_row)
ORDER BY w.user_id, w.factor_config_id
ON CONFLICT (user_id, factor_config_id) DO UPDATE SET
	factor_type = EXCLUDED.factor_type, value = EXCLUDED.value, secret = EXCLUDED.secret,
	thumbprint = EXCLUDED.thumbprint, expires_at = EXCLUDED.expires_at, job_id = EXCLUDED.job_id,
	source_row = EXCLUDED.source_row, updated_at = EXCLUDED.updated_at
WHERE (e.job_id = EXCLUDED.job_id AND e.source_row = EXCLUDED.source_row) OR (e.job_id <> EXCLUDED.job_id AND $12)`

// applyEnrollChunk is ApplyChunk on PostgreSQL, in one pgx transaction.
func (pgDialect) applyEnrollChunk(ctx context.Context, db *bun.DB, c *EnrollChunk) (JobProgress, error) {
	now := time.Now().UTC()
	results, writes := c.plan(now)
	var p JobProgress
	err := withPgxTx(ctx, db, func(tx pgx.Tx) error {
		if len(writes) > 0 {
			n := len(writes)
			users, configs, rows := make([]int64, n), make([]int64, n), make([]int64, n)
			types, values, thumbs := make([]string, n), make([]string, n), make([]string, n)
			secrets := make([][]byte, n)
			expires := make([]pgtype.Timestamptz, n)
			for i := range writes {
				w := &writes[i]
				users[i], configs[i], rows[i] = w.UserID, w.FactorConfigID, w.SourceRow
				types[i], values[i], thumbs[i], secrets[i] = string(w.FactorType), w.Value, w.Thumbprint, w.Secret
				if w.ExpiresAt != nil {
					expires[i] = pgtype.Timestamptz{Time: *w.ExpiresAt, Valid: true}
				}
			}
			tag, err := tx.Exec(ctx, upsertEnrollmentsPG, c.OrgID, c.JobID, now,
				users, configs, types, values, secrets, thumbs, expires, rows, c.Overwrite)
			if err != nil {
				return fmt.Errorf("upsert enrollments: %w", err)
			}
			if int(tag.RowsAffected()) != n {
				if err := c.explainKeptPG(ctx, tx, results, writes); err != nil {
					return err
				}
			}
		}
		p = c.progressAfter(results)
		if err := recordChunkPG(ctx, tx, c.OrgID, c.JobID, results, p); err != nil {
			return err
		}
		if c.NextOffset >= 0 {
			_, err := tx.Exec(ctx, `INSERT INTO enrollment_cursors (job_id, next_row, byte_offset) VALUES ($1, $2, $3)
				ON CONFLICT (job_id, next_row) DO NOTHING`, c.JobID, c.NextRow, c.NextOffset)
			if err != nil {
				return fmt.Errorf("insert cursor: %w", err)
			}
		}
		return nil
	})
	return p, err
}

// explainKeptPG finds which of the chunk's writes landed (the enrollment
// now carries the write's job and row) and explains the others.
func (c *EnrollChunk) explainKeptPG(ctx context.Context, tx pgx.Tx, results []JobResult, writes []Enrollment) error {
	users := make([]int64, 0, len(writes))
	for i := range writes {
		if i == 0 || writes[i].UserID != writes[i-1].UserID {
			users = append(users, writes[i].UserID)
		}
	}
	rows, err := tx.Query(ctx, `SELECT user_id, factor_config_id, job_id, source_row FROM enrollments
		WHERE org_id = $1 AND user_id = ANY($2)`, c.OrgID, users)
	if err != nil {
		return fmt.Errorf("select kept enrollments: %w", err)
	}
	var existing []Enrollment
	for rows.Next() {
		var e Enrollment
		if err := rows.Scan(&e.UserID, &e.FactorConfigID, &e.JobID, &e.SourceRow); err != nil {
			rows.Close()
			return fmt.Errorf("select kept enrollments: %w", err)
		}
		existing = append(existing, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("select kept enrollments: %w", err)
	}
	want := make(map[enrollmentKey]int64, len(writes))
	for _, w := range writes {
		want[enrollmentKey{w.UserID, w.FactorConfigID}] = w.SourceRow
	}
	written := make(map[enrollmentKey]bool, len(writes))
	for _, e := range existing {
		k := enrollmentKey{e.UserID, e.FactorConfigID}
		if row, ok := want[k]; ok && e.JobID == c.JobID && e.SourceRow == row {
			written[k] = true
		}
	}
	c.explainKept(results, written, existing)
	return nil
}

// matchUsers looks each value up through the organization's index on the
// key: one indexed probe per value, whatever the planner knows of the table.
// (An IN list of thousands of values over an expression index without
// statistics is planned as a scan of every user of the organization.) A key
// that several users share matches the oldest of them.
func (pgDialect) matchUsers(ctx context.Context, db *bun.DB, orgID int64, key UserKey, values []string) (map[string]int64, error) {
	probe, err := userKeyProbe(key, "", "v.k")
	if err != nil {
		return nil, err
	}
	sort.Strings(values) // probes in index order
	// OFFSET 0 keeps the subquery a parameterized probe: flattened into a
	// join, it may be planned as a merge over the organization's whole index.
	return matchedUsers(db.DB.QueryContext(ctx, `SELECT v.k, u.id FROM unnest($2::text[]) AS v(k)
		CROSS JOIN LATERAL (SELECT id FROM users WHERE org_id = $1 AND `+probe+` OFFSET 0) AS u`, orgID, values))
}

func (pgDialect) emailLocalPart(col string) string {
	return "split_part(" + col + ", '@', 1)"
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
func (pgDialect) writeSyncBatch(ctx context.Context, tx bun.Tx, w *syncWrite) error {
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
