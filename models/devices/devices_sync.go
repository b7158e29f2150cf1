package devices

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/jobs"
	"iam/models/sqldb"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Account-linking sync jobs (POST /device-account-linking/sync-now): the
// organization's settings applied to every unlinked local account of every
// device, in batches, by a job of module Devices.
const (
	// The job's kind is DeviceSyncJobKind (jobs.go).
	DevicesModule    = "Devices"
	DeviceSyncAction = "Sync account links"
	// ResultSkipped is the per-account result of an account a sync left
	// unlinked; its message says why.
	ResultSkipped = "SKIPPED"
	// SyncActor is the actor the link history names for a sync's links.
	SyncActor = "sync"
)

// ErrLinkingDisabled answers a sync asked while account linking is off.
var ErrLinkingDisabled = &models.Error{Code: models.ECONFLICT, Title: "Account Linking Disabled",
	Detail: "account linking is off (is_enabled false): enable it before a sync"}

// StartSync writes a QUEUED sync job of the organization with its current
// account-linking settings as input, or returns the sync already queued or
// running (created false). Two concurrent calls make one job: the second
// insert meets the partial unique index and reads the first's job.
// ECONFLICT (ErrLinkingDisabled) when linking is off.
func (s *DeviceStore) StartSync(ctx context.Context, orgID, createdBy int64) (job *jobs.Job, created bool, err error) {
	set, err := linkingSettings(ctx, s.db, orgID)
	if err != nil {
		return nil, false, err
	}
	if !set.IsEnabled {
		return nil, false, ErrLinkingDisabled
	}
	input, err := json.Marshal(set)
	if err != nil {
		return nil, false, err
	}
	for range 5 {
		if running, err := s.RunningSync(ctx, orgID); err != nil || running != nil {
			return running, false, err
		}
		job = &jobs.Job{OrgID: orgID, Kind: jobs.DeviceSyncJobKind, Module: DevicesModule, ActionName: DeviceSyncAction,
			Entity: "local_account", Input: input, CreatedBy: createdBy}
		// In a transaction of its own, which writes the job's events.
		err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
			return jobs.InsertJob(ctx, tx, job)
		})
		if err == nil {
			return job, true, nil
		}
		if !sqldb.IsUniqueViolation(err) {
			return nil, false, models.Unavailable(err)
		}
		// Another request made the job meanwhile: read it (or, should it
		// have ended already, try again).
	}
	return nil, false, models.Errorf(models.ECONFLICT, "a sync job is being started; try again")
}

// RunningSync returns the organization's QUEUED or RUNNING sync job, nil
// when there is none.
func (s *DeviceStore) RunningSync(ctx context.Context, orgID int64) (*jobs.Job, error) {
	var running []jobs.Job
	if err := s.db.NewSelect().Model(&running).
		Where("org_id = ? AND kind = ? AND status IN (?)", orgID, jobs.DeviceSyncJobKind, bun.List([]jobs.JobStatus{jobs.JobQueued, jobs.JobRunning})).
		Limit(1).Scan(ctx); err != nil {
		return nil, models.Unavailable(fmt.Errorf("read sync jobs: %w", err))
	}
	if len(running) == 0 {
		return nil, nil
	}
	return &running[0], nil
}

// SyncBatchResult is where a sync batch left the job.
type SyncBatchResult struct {
	Last     int64            // the last account covered (0: none yet)
	Done     bool             // no unlinked account is left after Last
	Progress jobs.JobProgress // the job's absolute progress
}

// userLinkKey is the SQL expression (over users aliased u) whose value the
// lower-cased local account name must equal for set, its arguments, and the
// condition that the attributes it reads are not empty.
func userLinkKey(d sqldb.Dialect, set *AccountLinkingSettings) (expr string, args []any, nonEmpty string, err error) {
	cols := map[string]string{
		"email": "u.email", "employeeID": "u.employee_id", "displayName": "u.display_name",
		"firstName": "u.first_name", "lastName": "u.last_name", "mobileNumber": "u.mobile_number",
		"%first_name%": "u.first_name", "%last_name%": "u.last_name", "%display_name%": "u.display_name",
		"%email%": "u.email", "%employee_id%": "u.employee_id",
	}
	local := d.EmailLocalPart("u.email")
	cols["email_local_part"], cols["%email_local_part%"] = local, local
	var used []string
	switch set.AttributeType {
	case "attribute":
		c, ok := cols[set.AttributeValue]
		if !ok {
			return "", nil, "", models.Invalid("attribute_value", "unknown attribute %q", set.AttributeValue)
		}
		expr, used = "lower("+c+")", []string{c}
	case "naming_format":
		var parts []string
		pat, prev := set.AttributeValue, 0
		for _, loc := range macroRe.FindAllStringIndex(pat, -1) {
			if loc[0] > prev {
				parts, args = append(parts, "?"), append(args, strings.ToLower(pat[prev:loc[0]]))
			}
			c, ok := cols[pat[loc[0]:loc[1]]]
			if !ok {
				return "", nil, "", models.Invalid("attribute_value", "unknown macro %s", pat[loc[0]:loc[1]])
			}
			parts, used = append(parts, c), append(used, c)
			prev = loc[1]
		}
		if prev < len(pat) {
			parts, args = append(parts, "?"), append(args, strings.ToLower(pat[prev:]))
		}
		if len(used) == 0 {
			return "", nil, "", models.Invalid("attribute_value", "a naming format uses at least one macro")
		}
		expr = "lower(" + strings.Join(parts, " || ") + ")"
	default:
		return "", nil, "", models.Invalid("attribute_type", "must be attribute or naming_format")
	}
	conds := make([]string, 0, len(used))
	for _, c := range slices.Compact(slices.Sorted(slices.Values(used))) {
		conds = append(conds, c+" <> ''")
	}
	return expr, args, strings.Join(conds, " AND "), nil
}

func restricted(set *AccountLinkingSettings, name string) bool {
	for _, n := range set.LinkRestrictedLocalAccounts {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// SyncBatch applies set to the next size unlinked local accounts (in id
// order) of the organization's devices that are not being uninstalled, in
// one transaction with the job's per-account results and progress: an
// account whose name matches exactly one user (without regard to case; see
// userLinkKey) gets an Automatic link (pending_link, a link command, a
// history entry) unless that user is linked or pending to another account
// of the device; every other account is SKIPPED with the reason.
//
// The job row is the cursor: it is locked first, and the batch starts after
// the account of its last result, so a batch retried after its commit (a
// worker killed before its activity completed) finds its work done and goes
// on with the next accounts; no account is linked twice. On the first batch
// the job's total is the count of unlinked accounts. The decisions are made
// here (planSync), the batch's rows written by the dialect (writeSyncBatch:
// one statement on PostgreSQL). ENOTFOUND when the job was deleted;
// ECONFLICT when it is not RUNNING.
func (s *DeviceStore) SyncBatch(ctx context.Context, orgID, jobID int64, set *AccountLinkingSettings, size int) (*SyncBatchResult, error) {
	key, keyArgs, nonEmpty, err := userLinkKey(s.d, set)
	if err != nil {
		return nil, err
	}
	size = min(max(size, 1), 5000)
	out := &SyncBatchResult{}
	if err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		*out = SyncBatchResult{}
		var job jobs.Job
		if err := s.d.LockRows(tx.NewSelect().Model(&job).Where("org_id = ? AND id = ?", orgID, jobID), "UPDATE").Scan(ctx); err != nil {
			if models.IsNoRows(err) {
				return jobs.ErrJobNotFound
			}
			return fmt.Errorf("read job: %w", err)
		}
		if job.Status != jobs.JobRunning {
			return models.Errorf(models.ECONFLICT, "the job is %s, not RUNNING", job.Status)
		}
		p := job.Progress()
		// The job's last result (the cursor) and its state (the row of the
		// user keys made by its first batch, users 0 once the last ended),
		// read in one statement now that the job is locked.
		var last sql.NullString
		var state sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT (SELECT entity_id FROM job_results WHERE job_id = ? AND seq = ?), "+
			"(SELECT users FROM device_sync_keys WHERE job_id = ? AND link_key = '')", jobID, p.Processed, jobID).Scan(&last, &state); err != nil {
			return fmt.Errorf("read the sync's cursor: %w", err)
		}
		if p.Processed > 0 {
			if !last.Valid {
				return fmt.Errorf("read the job's last result: result %d is missing", p.Processed)
			}
			cursor, err := models.ParseID("entity_id", last.String)
			if err != nil {
				return err
			}
			out.Last = cursor
		}
		candidates := func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Join("JOIN devices AS d ON d.id = a.device_id").
				Where("a.org_id = ? AND a.link_status = ? AND d.uninstall_requested_at IS NULL", orgID, LinkUnlinked)
		}
		switch {
		case !state.Valid:
			n, err := candidates(tx.NewSelect().TableExpr("device_accounts AS a")).Count(ctx)
			if err != nil {
				return fmt.Errorf("count accounts: %w", err)
			}
			p.Total = int64(n)
			if err := s.materializeKeys(ctx, tx, orgID, jobID, key, keyArgs, nonEmpty); err != nil {
				return err
			}
		case state.Int64 == 0: // the sync has ended: a batch retried after the last
			out.Done, out.Progress = true, p
			return nil
		}
		// The next accounts with the user their name matches (by the job's
		// keys) and their devices, locked (in id order, as every writer of
		// several devices does), in one statement. The device columns are
		// the locked rows' own; a device deleted meanwhile drops its
		// accounts from the answer.
		rows, err := s.d.LockRows(tx.NewSelect().TableExpr("devices AS ld").
			ColumnExpr("c.id, c.device_id, c.user_id, c.users, ld.name, ld.uninstall_requested_at IS NOT NULL AS uninstalling").
			Join("JOIN (?) AS c ON c.device_id = ld.id", candidates(tx.NewSelect().TableExpr("device_accounts AS a").
				ColumnExpr("a.id, a.device_id, coalesce(k.user_id, 0) AS user_id, coalesce(k.users, 0) AS users").
				Join("LEFT JOIN device_sync_keys AS k ON k.job_id = ? AND k.link_key = lower(a.user_name)", jobID)).
				Where("a.id > ?", out.Last).OrderExpr("a.id").Limit(int64(size+1))).
			OrderExpr("ld.id, c.id"), "UPDATE OF ld").Rows(ctx)
		next := make([]syncCandidate, 0, size+1)
		if err = scanEach(rows, err, func(rows *sql.Rows) error {
			var c syncCandidate
			scanErr := rows.Scan(&c.ID, &c.DeviceID, &c.UserID, &c.Users, &c.DeviceName, &c.Uninstalling)
			next = append(next, c)
			return scanErr
		}); err != nil {
			return fmt.Errorf("select accounts: %w", err)
		}
		slices.SortFunc(next, func(a, b syncCandidate) int { return cmp.Compare(a.ID, b.ID) })
		if len(next) > size {
			next = next[:size]
		} else {
			// A short answer ends the sync, unless accounts of devices
			// deleted meanwhile made it short: then an account after it
			// says so.
			after := out.Last
			if len(next) > 0 {
				after = next[len(next)-1].ID
			}
			more, err := candidates(tx.NewSelect().TableExpr("device_accounts AS a")).Where("a.id > ?", after).Exists(ctx)
			if err != nil {
				return fmt.Errorf("select accounts: %w", err)
			}
			out.Done = !more
		}
		w := &syncWrite{OrgID: orgID, JobID: jobID, Now: time.Now().UTC()}
		if len(next) > 0 {
			if err := s.planSync(ctx, tx, w, set, next, &p); err != nil {
				return err
			}
			out.Last = next[len(next)-1].ID
		}
		if out.Done {
			p.Total = p.Processed
			if _, err := tx.NewDelete().Table("device_sync_keys").Where("job_id = ? AND link_key <> ''", jobID).Exec(ctx); err != nil {
				return fmt.Errorf("drop the sync's keys: %w", err)
			}
			if _, err := tx.NewUpdate().Table("device_sync_keys").Set("users = 0").Where("job_id = ? AND link_key = ''", jobID).Exec(ctx); err != nil {
				return fmt.Errorf("end the sync: %w", err)
			}
		}
		p.Total = max(p.Total, p.Processed)
		out.Progress, w.Progress = p, p
		return s.d.writeSyncBatch(ctx, tx, w)
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// syncCandidate is an account a batch takes, with the user its name
// matched (UserID the least of Users users; 0 and 0 for none).
type syncCandidate struct {
	ID, DeviceID, UserID, Users int64
	// The device (as locked): its name, and whether its agent is being
	// uninstalled.
	DeviceName   string
	Uninstalling bool
}

// planSync decides, for the accounts next (ascending ids, their devices
// locked), which are linked and which skipped, into w's links and results
// (numbered after p.Processed), advancing p.
func (s *DeviceStore) planSync(ctx context.Context, tx bun.Tx, w *syncWrite, set *AccountLinkingSettings,
	next []syncCandidate, p *jobs.JobProgress) error {
	// The devices' accounts as they are now that the devices are locked
	// (an account never moves to another device): the batch's, and the
	// links the devices have.
	devIDs := make([]int64, len(next))
	byID := make(map[int64]*syncCandidate, len(next))
	for i := range next {
		devIDs[i] = next[i].DeviceID
		byID[next[i].DeviceID] = &next[i]
	}
	devIDs = slices.Compact(slices.Sorted(slices.Values(devIDs)))
	// Scanned by hand: a batch reads thousands of accounts.
	rows, err := tx.NewSelect().Table("device_accounts").Column("id", "device_id", "user_name", "permission_level", "link_status", "idp_user_id").
		Where("device_id IN (?)", bun.List(devIDs)).Rows(ctx)
	var accs []syncAccount
	if err = scanEach(rows, err, func(rows *sql.Rows) error {
		var a syncAccount
		scanErr := rows.Scan(&a.ID, &a.DeviceID, &a.UserName, &a.PermissionLevel, &a.LinkStatus, &a.IdpUserID)
		accs = append(accs, a)
		return scanErr
	}); err != nil {
		return fmt.Errorf("read accounts: %w", err)
	}
	type pair struct{ dev, user int64 }
	taken := make(map[pair]string)
	byAccount := make(map[int64]*syncAccount, len(accs))
	for i := range accs {
		a := &accs[i]
		byAccount[a.ID] = a
		if a.IdpUserID.Valid {
			taken[pair{a.DeviceID, a.IdpUserID.Int64}] = a.UserName
		}
	}
	// One result per id, so that the last result is the batch's last id:
	// the next batch's cursor.
	results := make([]jobs.JobResult, 0, len(next))
	for _, m := range next {
		res := jobs.JobResult{JobID: w.JobID, Seq: p.Processed + int64(len(results)) + 1, EntityID: models.FormatID(m.ID), Status: ResultSkipped}
		a := byAccount[m.ID]
		if a == nil {
			res.Message = "skipped: the account was removed from its device"
			results = append(results, res)
			continue
		}
		d := byID[a.DeviceID]
		switch {
		case d == nil || d.Uninstalling:
			res.Message = "skipped: the device's agent is being uninstalled"
		case a.LinkStatus != LinkUnlinked:
			res.Message = "skipped: the account is " + a.LinkStatus
		case restricted(set, a.UserName):
			res.Message = "skipped: " + strconv.Quote(a.UserName) + " is restricted from linking"
		case m.Users == 0:
			res.Message = "skipped: no user matches " + strconv.Quote(a.UserName)
		case m.Users > 1:
			res.Message = "skipped: " + strconv.FormatInt(m.Users, 10) + " users match " + strconv.Quote(a.UserName)
		case taken[pair{a.DeviceID, m.UserID}] != "":
			res.Message = "skipped: user " + models.FormatID(m.UserID) + " is already linked to the local account " +
				strconv.Quote(taken[pair{a.DeviceID, m.UserID}]) + " of this device"
		default:
			taken[pair{a.DeviceID, m.UserID}] = a.UserName
			level := a.PermissionLevel
			if !models.OneOf(level, PermissionLevels) {
				level = PermissionLevels[0]
			}
			w.Links = append(w.Links, syncLink{AccountID: a.ID, DeviceID: d.DeviceID, UserID: m.UserID,
				CommandID: sqldb.NewID(), EventID: sqldb.NewID(), UserName: a.UserName, DeviceName: d.DeviceName, Level: level})
			res.Status = jobs.ResultSuccess
			res.Message = "linked to user " + models.FormatID(m.UserID) + " on device " + models.FormatID(d.DeviceID) + " (pending the agent)"
			p.Success++
		}
		results = append(results, res)
	}
	w.Results = append(w.Results, results...)
	p.Processed += int64(len(results))
	return nil
}

// syncAccount is an account as a sync batch reads it after locking its
// device.
type syncAccount struct {
	ID, DeviceID                          int64
	UserName, PermissionLevel, LinkStatus string
	IdpUserID                             sql.NullInt64
}

// scanEach calls fn for each row of rows (the answer of a query that
// failed with err, or did not), then closes rows.
func scanEach(rows *sql.Rows, err error, fn func(*sql.Rows) error) error {
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }() // rows.Err reports the read's errors
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// syncWrite is what a sync batch writes in its transaction (the dialect's
// writeSyncBatch): for each link, the account's pending_link state, its
// link command and history entry; the per-account results; the job's
// progress.
type syncWrite struct {
	OrgID, JobID int64
	Now          time.Time
	Links        []syncLink
	Results      []jobs.JobResult // consecutive seqs
	Progress     jobs.JobProgress
}

// syncLink is an Automatic link a sync makes: the account, its device, the
// user, the ids of its command and history entry, and the link's
// permission level (one of PermissionLevels).
type syncLink struct {
	AccountID, DeviceID, UserID, CommandID, EventID int64
	UserName, DeviceName, Level                     string
}

// errSyncRace is a batch whose accounts changed under it (which the
// devices' locks rule out): the transaction is rolled back and the batch
// retried.
var errSyncRace = errors.New("link accounts: an account of the batch is no longer unlinked")

// linkArgs are the arguments of a link command (the agent's view of it).
func (l *syncLink) linkArgs() (json.RawMessage, error) {
	return json.Marshal(map[string]string{
		"account_id": models.FormatID(l.AccountID), "user_name": l.UserName,
		"idp_user_id": models.FormatID(l.UserID), "permission_level": l.Level,
	})
}

// writeSyncBatchRows is writeSyncBatch a statement per kind of row, with
// bun's multi-row inserts.
func writeSyncBatchRows(ctx context.Context, tx bun.Tx, w *syncWrite) error {
	if len(w.Links) > 0 {
		cmds := make([]Command, len(w.Links))
		events := make([]LinkEvent, len(w.Links))
		ids := make([]int64, len(w.Links))
		for i := range w.Links {
			l := &w.Links[i]
			args, err := l.linkArgs()
			if err != nil {
				return err
			}
			ids[i] = l.AccountID
			cmds[i] = Command{ID: l.CommandID, OrgID: w.OrgID, DeviceID: l.DeviceID, AccountID: &l.AccountID, Type: CmdLink,
				Args: args, Status: CommandPending, CreatedAt: w.Now}
			events[i] = LinkEvent{ID: l.EventID, OrgID: w.OrgID, DeviceID: l.DeviceID, DeviceName: l.DeviceName,
				AccountID: &l.AccountID, UserName: l.UserName, IdpUserID: &l.UserID, Action: "link", LinkType: LinkAutomatic,
				OldState: LinkUnlinked, NewState: LinkPending, Actor: SyncActor, JobID: &w.JobID, CreatedAt: w.Now}
		}
		for i := range w.Links {
			l := &w.Links[i]
			res, err := tx.NewUpdate().Table("device_accounts").
				Set("link_status = ?, link_type = ?, idp_user_id = ?", LinkPending, LinkAutomatic, l.UserID).
				Set("link_permission_level = ?, link_command_id = ?, linked_at = NULL, updated_at = ?", l.Level, l.CommandID, w.Now).
				Where("id = ? AND link_status = ?", l.AccountID, LinkUnlinked).Exec(ctx)
			if err != nil {
				// A unique violation (a user linked meanwhile on one of the
				// devices, which the devices' locks rule out) is no domain
				// error: the batch is retried and sees the link.
				return fmt.Errorf("link accounts: %w", err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return errSyncRace
			}
		}
		if _, err := tx.NewInsert().Model(&cmds).Exec(ctx); err != nil {
			return fmt.Errorf("queue commands: %w", err)
		}
		if _, err := tx.NewInsert().Model(&events).Exec(ctx); err != nil {
			return fmt.Errorf("record link history: %w", err)
		}
	}
	if len(w.Results) > 0 {
		if _, err := tx.NewInsert().Model(&w.Results).Exec(ctx); err != nil {
			return fmt.Errorf("record job results: %w", err)
		}
	}
	p := w.Progress
	if _, err := tx.NewUpdate().Model((*jobs.Job)(nil)).
		Set("processed = ?", p.Processed).Set("total = ?", p.Total).
		Set("success_count = ?", p.Success).Set("error_count = ?", p.Failed).
		Set("updated_at = ?", w.Now).
		Where("id = ?", w.JobID).Exec(ctx); err != nil {
		return fmt.Errorf("record job progress: %w", err)
	}
	return nil
}

// materializeKeys writes, once per sync job, the key of every user of the
// organization that has one (userLinkKey) with the number of users sharing
// it and the least of their ids, and the job's state row (an empty link_key,
// users 1 while the sync runs, 0 once it ended): one pass over the users,
// so that each batch matches its accounts through the keys' index.
func (s *DeviceStore) materializeKeys(ctx context.Context, tx bun.Tx, orgID, jobID int64, key string, keyArgs []any, nonEmpty string) error {
	// key holds a placeholder for each of keyArgs, and nothing else of the
	// caller's: literal text of a naming format is an argument.
	args := append([]any{jobID}, keyArgs...)
	args = append(args, orgID)
	if _, err := tx.ExecContext(ctx, "INSERT INTO device_sync_keys (job_id, link_key, user_id, users) "+
		"SELECT ?, x.k, min(x.id), count(*) FROM (SELECT u.id, "+key+" AS k FROM users AS u WHERE u.org_id = ? AND "+nonEmpty+
		") AS x WHERE x.k <> '' GROUP BY x.k", args...); err != nil {
		return fmt.Errorf("write the sync's user keys: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO device_sync_keys (job_id, link_key, user_id, users) VALUES (?, '', 0, 1)", jobID); err != nil {
		return fmt.Errorf("write the sync's state: %w", err)
	}
	return nil
}

// SyncLinksSetBased makes, in one UPDATE statement, the links a sync of
// set would make on the organization's accounts, without their commands,
// history or results: the benchmark's yardstick (cmd/syncbench). It
// returns the number of accounts linked.
func (s *DeviceStore) SyncLinksSetBased(ctx context.Context, orgID int64, set *AccountLinkingSettings) (int64, error) {
	key, keyArgs, nonEmpty, err := userLinkKey(s.d, set)
	if err != nil {
		return 0, err
	}
	restrictedNames := []string{""}
	for _, n := range set.LinkRestrictedLocalAccounts {
		restrictedNames = append(restrictedNames, strings.ToLower(n))
	}
	args := append([]any{orgID, LinkUnlinked, bun.List(restrictedNames)}, keyArgs...)
	args = append(args, orgID, LinkPending, LinkAutomatic, time.Now().UTC())
	res, err := s.db.ExecContext(ctx, `WITH cand AS (
	SELECT a.id, a.device_id, lower(a.user_name) AS k FROM device_accounts AS a JOIN devices AS d ON d.id = a.device_id
	WHERE a.org_id = ? AND a.link_status = ? AND d.uninstall_requested_at IS NULL AND lower(a.user_name) NOT IN (?)
), m AS (
	SELECT c.id, c.device_id, min(u.id) AS uid, count(*) AS n FROM cand AS c
	JOIN users AS u ON `+key+` = c.k AND `+nonEmpty+` AND u.org_id = ? GROUP BY c.id, c.device_id
), one AS (
	SELECT m.id, m.uid, row_number() OVER (PARTITION BY m.device_id, m.uid ORDER BY m.id) AS r FROM m
	WHERE m.n = 1 AND NOT EXISTS (SELECT 1 FROM device_accounts AS x WHERE x.device_id = m.device_id AND x.idp_user_id = m.uid)
)
UPDATE device_accounts SET link_status = ?, link_type = ?, idp_user_id = one.uid, updated_at = ?
FROM one WHERE device_accounts.id = one.id AND one.r = 1`, args...)
	if err != nil {
		return 0, models.Unavailable(fmt.Errorf("link accounts: %w", err))
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// SeedDevice is a device SeedDevices writes: a SvcJoined device named Name
// with the local accounts Accounts (Standard, unlinked).
type SeedDevice struct {
	Name     string
	Accounts []string
}

// SeedDevices writes devices of the organization in multi-row inserts,
// for tests and benchmarks that need many (no agent registers them; they
// are pending until one checks in, which none can: they have no secret).
func (s *DeviceStore) SeedDevices(ctx context.Context, orgID int64, devices []SeedDevice) ([]int64, error) {
	const batch = 1000
	now := time.Now().UTC()
	ids := make([]int64, 0, len(devices))
	for start := 0; start < len(devices); start += batch {
		part := devices[start:min(start+batch, len(devices))]
		rows := make([]Device, len(part))
		var accs []LocalAccount
		for i, sd := range part {
			rows[i] = Device{ID: sqldb.NewID(), OrgID: orgID, Platform: "linux", CheckinIntervalSeconds: 60,
				AgentInstalledTime: now, DateAdded: now, UpdatedAt: now, TotalLocalAccounts: int64(len(sd.Accounts))}
			rows[i].Name, rows[i].OSType, rows[i].JoinType, rows[i].SerialNumber = sd.Name, "Linux", "SvcJoined", sd.Name
			ids = append(ids, rows[i].ID)
			for _, n := range sd.Accounts {
				accs = append(accs, LocalAccount{ID: sqldb.NewID(), OrgID: orgID, DeviceID: rows[i].ID, UserName: n,
					PermissionLevel: PermissionLevels[0], LinkStatus: LinkUnlinked, CreatedAt: now, UpdatedAt: now})
			}
		}
		err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
				return fmt.Errorf("insert devices: %w", err)
			}
			if len(accs) > 0 {
				if _, err := tx.NewInsert().Model(&accs).Exec(ctx); err != nil {
					return fmt.Errorf("insert accounts: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return ids, nil
}
