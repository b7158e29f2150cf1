package management

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/listing"
	"iam/models/sqldb"
)

// ExecutionStatus is the state of a management action's execution (spec
// section 3). An execution is written yet_to_start with its job; pending
// once the job runs; it ends completed (every user succeeded),
// completed_with_errors (some failed), time_out (the deadline passed) or
// interrupted (the job was deleted or cancelled). A retry of a finished
// execution makes it yet_to_start again, as a new attempt.
type ExecutionStatus string

// The execution states.
const (
	ExecYetToStart          ExecutionStatus = "yet_to_start"
	ExecPending             ExecutionStatus = "pending"
	ExecCompleted           ExecutionStatus = "completed"
	ExecCompletedWithErrors ExecutionStatus = "completed_with_errors"
	ExecTimeOut             ExecutionStatus = "time_out"
	ExecInterrupted         ExecutionStatus = "interrupted"
)

// Finished reports whether s is a final state.
func (s ExecutionStatus) Finished() bool {
	return s != ExecYetToStart && s != ExecPending
}

// MgmtModule is the module of management jobs (spec 2.17).
const MgmtModule = "Management"

// Per-user result states of an execution (spec 2.16).
const (
	ExecResultSuccess = "success"
	ExecResultFailure = "failure"
)

// MaxSelectionUserIDs is the most user ids a selection may name.
const MaxSelectionUserIDs = 10000

// Selection names the users an execution works on: exactly one of an
// upload's MAPPED rows, a list of user ids, or a filter over user
// attributes (MgmtDataListing's language).
type Selection struct {
	UploadID int64   `json:"upload_id,string,omitempty"`
	UserIDs  []int64 `json:"-"`
	Filter   string  `json:"filter,omitempty"`
	// Count is the number of users the selection named when it was made.
	Count int64 `json:"count"`
	// IDs are UserIDs as digit strings, as the execution shows them.
	IDs []string `json:"user_ids,omitempty"`
}

// Execution is a run of a management action (spec 2.16), with the attempt
// it is at and the job that runs that attempt.
type Execution struct {
	bun.BaseModel `bun:"table:mgmt_executions"`

	ID              int64           `bun:"id,pk"`
	OrgID           int64           `bun:"org_id"`
	Action          MgmtAction      `bun:"action"`
	Status          ExecutionStatus `bun:"status"`
	Attempt         int             `bun:"attempt"`
	JobID           int64           `bun:"job_id"`
	Selection       json.RawMessage `bun:"selection,type:json"`
	TargetContainer string          `bun:"target_container"`
	// Total is the number of users of the first attempt; SuccessCount the
	// users that succeeded in any attempt; FailedCount those the latest
	// attempt did not succeed for (failed or, when it ended early, never
	// reached).
	Total        int64      `bun:"total"`
	SuccessCount int64      `bun:"success_count"`
	FailedCount  int64      `bun:"failed_count"`
	CreatedBy    int64      `bun:"created_by"`
	CreatedAt    time.Time  `bun:"created_at"`
	UpdatedAt    time.Time  `bun:"updated_at"`
	FinishedAt   *time.Time `bun:"finished_at"`
}

// ExecutionAttempt is one run of an execution's users: the first, or a
// retry of the ones that did not succeed.
type ExecutionAttempt struct {
	bun.BaseModel `bun:"table:mgmt_execution_attempts"`

	ExecutionID  int64           `bun:"execution_id,pk"`
	Attempt      int             `bun:"attempt,pk"`
	JobID        int64           `bun:"job_id"`
	Status       ExecutionStatus `bun:"status"`
	Total        int64           `bun:"total"`
	SuccessCount int64           `bun:"success_count"`
	FailedCount  int64           `bun:"failed_count"`
	CreatedBy    int64           `bun:"created_by"`
	CreatedAt    time.Time       `bun:"created_at"`
	FinishedAt   *time.Time      `bun:"finished_at"`
}

// ExecutionTarget is a user an attempt works on; Seq orders them.
type ExecutionTarget struct {
	bun.BaseModel `bun:"table:mgmt_execution_targets"`

	ExecutionID int64 `bun:"execution_id,pk"`
	Attempt     int   `bun:"attempt,pk"`
	Seq         int64 `bun:"seq,pk"`
	UserID      int64 `bun:"user_id"`
}

// ExecutionResult is the outcome for one user in one attempt, with the
// user's name and email as they were when it was processed.
type ExecutionResult struct {
	bun.BaseModel `bun:"table:mgmt_execution_results"`

	ExecutionID int64  `bun:"execution_id,pk"`
	Attempt     int    `bun:"attempt,pk"`
	Seq         int64  `bun:"seq,pk"`
	UserID      int64  `bun:"user_id"`
	FirstName   string `bun:"first_name"`
	LastName    string `bun:"last_name"`
	Email       string `bun:"email"`
	Status      string `bun:"status"`
	Message     string `bun:"message"`
}

// ExecutionResultListing is the allow-list of an execution's data: the
// order users were processed in, offset paging from 0, 200 a page.
var ExecutionResultListing = listing.MustSchema(listing.Schema{
	Name: "execution_results",
	Key:  "seq",
	Attributes: []listing.Attribute{
		{Name: "seq", Column: "seq", Type: listing.TypeInteger, Sort: true},
		{Name: "user_id", Column: "user_id", Type: listing.TypeID, Filter: true},
		{Name: "email", Column: "email", Type: listing.TypeString, Filter: true},
		{Name: "status", Column: "status", Type: listing.TypeString, Filter: true},
		{Name: "message", Column: "message", Type: listing.TypeString, Filter: true},
	},
	DefaultLimit:     200,
	MaxLimit:         1000,
	Paging:           listing.OffsetPaging,
	StartIndexString: true,
})

// MgmtDataListing is the allow-list of an action's data and of a selection
// by filter: the user attributes, offset paging, 200 a page.
var MgmtDataListing = listing.MustSchema(listing.Schema{
	Name:             "management_data",
	Attributes:       identity.UserAttributes,
	DefaultLimit:     200,
	MaxLimit:         1000,
	Paging:           listing.OffsetPaging,
	StartIndexString: true,
})

// ErrExecutionNotFound answers an execution that is not the
// organization's, or not the action's.
var ErrExecutionNotFound = models.NotFound("Execution", "the execution does not exist")

// NewExecution is what CreateExecution needs.
type NewExecution struct {
	OrgID           int64
	Action          MgmtAction
	Selection       Selection
	TargetContainer string
	CreatedBy       int64
}

// CreateExecution freezes the selection's users as the first attempt's
// targets and writes the execution (yet_to_start) with its QUEUED job, in
// one transaction; the caller starts the job's workflow after. EINVALID
// when the selection names none or more than one kind of selector, a bad
// filter, an upload of another action, no user at all, or (move) a target
// container that is not an RFC 4514 name; ENOTFOUND for an unknown upload;
// ECONFLICT for an upload still resolving, or one that failed.
func (s *MgmtStore) CreateExecution(ctx context.Context, n NewExecution) (*Execution, *jobs.Job, error) {
	sel := n.Selection
	kinds := 0
	for _, set := range []bool{sel.UploadID != 0, sel.UserIDs != nil, sel.Filter != ""} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return nil, nil, models.Invalid("selection", "name the users by exactly one of upload_id, user_ids or filter")
	}
	if len(sel.UserIDs) > MaxSelectionUserIDs {
		return nil, nil, models.Invalid("user_ids", "names %d users; at most %d", len(sel.UserIDs), MaxSelectionUserIDs)
	}
	switch n.Action {
	case ActionMoveUsers:
		if n.TargetContainer == "" {
			return nil, nil, models.Invalid("target_container", "is required to move users")
		}
		if len(n.TargetContainer) > identity.MaxUserContainerLen {
			return nil, nil, models.Invalid("target_container", "must be at most %d characters", identity.MaxUserContainerLen)
		}
		if reason, ok := identity.CheckContainer(n.TargetContainer); !ok {
			return nil, nil, models.Invalid("target_container", "must be a distinguished name in RFC 4514 syntax (OU=Sales,DC=example,DC=com): it %s", reason)
		}
	case ActionDeleteUsers:
		if n.TargetContainer != "" {
			return nil, nil, models.Invalid("target_container", "is only for move-users")
		}
	default:
		return nil, nil, ErrMgmtActionNotFound
	}
	var where string
	var args []any
	if sel.Filter != "" {
		expr, err := listing.ParseFilter(sel.Filter)
		if err != nil {
			return nil, nil, models.Invalid("filter", "%v", err)
		}
		if where, args, err = MgmtDataListing.Where(s.db.Dialect().Name(), expr); err != nil {
			return nil, nil, models.Invalid("filter", "%v", err)
		}
	}
	now := time.Now().UTC()
	exec := &Execution{ID: sqldb.NewID(), OrgID: n.OrgID, Action: n.Action, Status: ExecYetToStart, Attempt: 1,
		TargetContainer: n.TargetContainer, CreatedBy: n.CreatedBy, CreatedAt: now, UpdatedAt: now}
	job := &jobs.Job{OrgID: n.OrgID, Kind: jobs.MgmtJobKind, Module: MgmtModule, ActionName: actionName(n.Action),
		Entity: "User", CreatedBy: n.CreatedBy}
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		// The job and the execution first: the targets refer to the
		// execution; a selection of nobody rolls everything back.
		if err := jobs.InsertJob(ctx, tx, job); err != nil {
			return err
		}
		exec.JobID = job.ID
		exec.Selection = json.RawMessage("{}")
		if _, err := tx.NewInsert().Model(exec).Exec(ctx); err != nil {
			return fmt.Errorf("insert execution: %w", err)
		}
		var count int64
		var err error
		switch {
		case sel.UploadID != 0:
			var up *MgmtUpload
			if up, err = getUpload(ctx, tx, n.OrgID, n.Action, sel.UploadID); err != nil {
				return err
			}
			if up.Status != UploadResolved {
				return errUploadNotResolved(up)
			}
			count, err = insertTargets(ctx, tx, exec.ID, 1, tx.NewSelect().Table("mgmt_upload_rows").
				ColumnExpr("row_no AS k").ColumnExpr("user_id AS u").
				Where("upload_id = ? AND status = ?", sel.UploadID, RowMapped))
		case sel.UserIDs != nil:
			count, err = insertUserIDTargets(ctx, tx, exec.ID, 1, sel.UserIDs)
		default:
			count, err = insertTargets(ctx, tx, exec.ID, 1, tx.NewSelect().Table("users").
				ColumnExpr("id AS k").ColumnExpr("id AS u").Where("org_id = ?", n.OrgID).Where(where, args...))
		}
		if err != nil {
			return err
		}
		if count == 0 {
			return models.Invalid("selection", "names no users")
		}
		sel.Count = count
		sel.IDs = nil
		for _, id := range sel.UserIDs {
			sel.IDs = append(sel.IDs, models.FormatID(id))
		}
		exec.Selection, _ = json.Marshal(sel)
		exec.Total, job.Total = count, count
		if _, err := tx.NewUpdate().Model(exec).Column("selection", "total").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("update execution: %w", err)
		}
		if _, err := tx.NewUpdate().Model(job).Column("total").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("update job: %w", err)
		}
		att := &ExecutionAttempt{ExecutionID: exec.ID, Attempt: 1, JobID: job.ID, Status: ExecYetToStart,
			Total: count, CreatedBy: n.CreatedBy, CreatedAt: now}
		if _, err := tx.NewInsert().Model(att).Exec(ctx); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		// The users it selects are the job's targets and results, not the
		// event's.
		return models.Record(ctx, models.AuditEvent{OrgID: n.OrgID, Type: audit.ManagementExecutionStarted,
			Targets: []models.EventTarget{executionTarget(exec), jobTarget(job)}})
	})
	if err != nil {
		return nil, nil, err
	}
	return exec, job, nil
}

// attemptAudit is what a retry changes of an execution, as its event
// shows it.
type attemptAudit struct {
	Attempt int             `json:"attempt"`
	Status  ExecutionStatus `json:"status"`
	JobID   int64           `json:"job_id,string"`
}

func actionName(a MgmtAction) string {
	if a == ActionMoveUsers {
		return "Move users"
	}
	return "Delete users"
}

func getUpload(ctx context.Context, db bun.IDB, orgID int64, a MgmtAction, id int64) (*MgmtUpload, error) {
	up := new(MgmtUpload)
	err := db.NewSelect().Model(up).Where("org_id = ? AND action = ? AND id = ?", orgID, a, id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrUploadNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select upload: %w", err)
	}
	return up, nil
}

// insertTargets inserts the (k, u) pairs src selects (an order key and a
// user id, named so) as the
// attempt's targets, numbered 1… in that order, and returns their count.
func insertTargets(ctx context.Context, tx bun.Tx, execID int64, attempt int, src *bun.SelectQuery) (int64, error) {
	res, err := tx.NewRaw(`INSERT INTO mgmt_execution_targets (execution_id, attempt, seq, user_id)
		SELECT ?, ?, ROW_NUMBER() OVER (ORDER BY src.k), src.u FROM (?) AS src`,
		execID, attempt, src).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("insert targets: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// insertUserIDTargets inserts ids, without repeats, in the order given.
func insertUserIDTargets(ctx context.Context, tx bun.Tx, execID int64, attempt int, ids []int64) (int64, error) {
	seen := make(map[int64]bool, len(ids))
	targets := make([]ExecutionTarget, 0, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		targets = append(targets, ExecutionTarget{ExecutionID: execID, Attempt: attempt, Seq: int64(len(targets) + 1), UserID: id})
	}
	for start := 0; start < len(targets); start += 1000 {
		chunk := targets[start:min(start+1000, len(targets))]
		if _, err := tx.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			return 0, fmt.Errorf("insert targets: %w", err)
		}
	}
	return int64(len(targets)), nil
}

// GetExecution returns an execution of the organization and action; it
// never writes (an execution whose job ended or went without it was
// interrupted then: EndJob). ENOTFOUND when it is another's.
func (s *MgmtStore) GetExecution(ctx context.Context, orgID int64, a MgmtAction, id int64) (*Execution, error) {
	return getExecution(ctx, s.db, orgID, a, id)
}

// EndJob is what management does in the transaction that ends or deletes
// job jobID (wired as jobs.JobStore.OnEnd): the upload the job was
// resolving fails (FailUploadOfJob), and the execution attempt the job ran,
// when it is still the execution's current one and unfinished, is
// interrupted, its counts taken from its stored results. An execution
// finished by its own attempt is left as it is.
func EndJob(ctx context.Context, tx bun.IDB, jobID int64, why string) error {
	if err := FailUploadOfJob(ctx, tx, jobID, why); err != nil {
		return err
	}
	var att ExecutionAttempt
	err := tx.NewSelect().Model(&att).Where("job_id = ?", jobID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("select the job's attempt: %w", err)
	}
	t, ok := tx.(bun.Tx)
	if !ok {
		return errors.New("interrupt an execution: not in a transaction")
	}
	var orgID int64
	if err = t.NewSelect().Table("mgmt_executions").Column("org_id").Where("id = ?", att.ExecutionID).Scan(ctx, &orgID); err != nil {
		return fmt.Errorf("select the attempt's execution: %w", err)
	}
	exec, err := lockExecution(ctx, t, sqldb.DialectOf(t), orgID, att.ExecutionID)
	if err != nil {
		return err
	}
	if exec.Status.Finished() || exec.Attempt != att.Attempt {
		return nil
	}
	status := ExecInterrupted
	return refreshCounts(ctx, t, exec, &status)
}

func getExecution(ctx context.Context, db bun.IDB, orgID int64, a MgmtAction, id int64) (*Execution, error) {
	exec := new(Execution)
	q := db.NewSelect().Model(exec).Where("org_id = ? AND id = ?", orgID, id)
	if a != "" {
		q = q.Where("action = ?", a)
	}
	err := q.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrExecutionNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select execution: %w", err)
	}
	return exec, nil
}

// ExecutionByJob returns the execution and attempt a job runs. ENOTFOUND
// when the job runs none.
func (s *MgmtStore) ExecutionByJob(ctx context.Context, orgID, jobID int64) (*Execution, *ExecutionAttempt, error) {
	att := new(ExecutionAttempt)
	err := s.db.NewSelect().Model(att).Where("job_id = ?", jobID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, ErrExecutionNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("select attempt: %w", err)
	}
	exec, err := getExecution(ctx, s.db, orgID, "", att.ExecutionID)
	if err != nil {
		return nil, nil, err
	}
	return exec, att, nil
}

// Attempts returns an execution's attempts, first first.
func (s *MgmtStore) Attempts(ctx context.Context, execID int64) ([]ExecutionAttempt, error) {
	var out []ExecutionAttempt
	if err := s.db.NewSelect().Model(&out).Where("execution_id = ?", execID).Order("attempt").Scan(ctx); err != nil {
		return nil, fmt.Errorf("select attempts: %w", err)
	}
	return out, nil
}

// ListResults returns a page of one attempt's results (attempt 0: the
// execution's current attempt). ENOTFOUND when the execution is not the
// organization's and action's, or has no such attempt.
func (s *MgmtStore) ListResults(ctx context.Context, orgID int64, a MgmtAction, execID int64, attempt int, p listing.Params) ([]ExecutionResult, listing.Meta, error) {
	exec, err := getExecution(ctx, s.db, orgID, a, execID)
	if err != nil {
		return nil, nil, err
	}
	if attempt == 0 {
		attempt = exec.Attempt
	}
	if attempt < 1 || attempt > exec.Attempt {
		return nil, nil, models.NotFound("Attempt", fmt.Sprintf("the execution has attempts 1 to %d", exec.Attempt))
	}
	var results []ExecutionResult
	q := s.db.NewSelect().Model(&results).Where("execution_id = ? AND attempt = ?", execID, attempt)
	meta, err := listing.Fetch(ctx, q, &results, ExecutionResultListing, p)
	return results, meta, err
}

// Targets returns up to limit targets of an attempt after seq afterSeq.
func (s *MgmtStore) Targets(ctx context.Context, execID int64, attempt int, afterSeq int64, limit int) ([]ExecutionTarget, error) {
	var out []ExecutionTarget
	err := s.db.NewSelect().Model(&out).Where("execution_id = ? AND attempt = ? AND seq > ?", execID, attempt, afterSeq).
		Order("seq").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select targets: %w", err)
	}
	return out, nil
}

// StartAttempt marks a yet_to_start attempt (and its execution) pending;
// an attempt already pending is left as it is. ECONFLICT when it has
// finished.
func (s *MgmtStore) StartAttempt(ctx context.Context, orgID, execID int64, attempt int) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		exec, err := lockExecution(ctx, tx, s.d, orgID, execID)
		if err != nil {
			return err
		}
		if exec.Attempt != attempt || exec.Status.Finished() {
			return models.Errorf(models.ECONFLICT, "attempt %d of the execution is not running", attempt)
		}
		now := time.Now().UTC()
		if _, err = tx.NewUpdate().Model((*Execution)(nil)).Set("status = ?", ExecPending).Set("updated_at = ?", now).
			Where("id = ? AND status = ?", execID, ExecYetToStart).Exec(ctx); err != nil {
			return fmt.Errorf("start execution: %w", err)
		}
		_, err = tx.NewUpdate().Model((*ExecutionAttempt)(nil)).Set("status = ?", ExecPending).
			Where("execution_id = ? AND attempt = ? AND status = ?", execID, attempt, ExecYetToStart).Exec(ctx)
		return err
	})
}

func lockExecution(ctx context.Context, tx bun.Tx, d sqldb.Dialect, orgID, execID int64) (*Execution, error) {
	exec := new(Execution)
	q := tx.NewSelect().Model(exec).Where("org_id = ? AND id = ?", orgID, execID)
	if err := d.LockRows(q, "NO KEY UPDATE").Scan(ctx); errors.Is(err, sql.ErrNoRows) {
		return nil, ErrExecutionNotFound
	} else if err != nil {
		return nil, fmt.Errorf("select execution: %w", err)
	}
	return exec, nil
}

// RecordResults stores results of a pending attempt, upserted by (attempt,
// seq) so that recording a chunk twice leaves the same rows, and refreshes
// the attempt's and execution's counts from the stored results. ECONFLICT
// when the attempt is not pending any more.
func (s *MgmtStore) RecordResults(ctx context.Context, orgID, execID int64, attempt int, results []ExecutionResult) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		exec, err := lockExecution(ctx, tx, s.d, orgID, execID)
		if err != nil {
			return err
		}
		if exec.Attempt != attempt || exec.Status.Finished() {
			return models.Errorf(models.ECONFLICT, "attempt %d of the execution is not running", attempt)
		}
		for i := range results {
			results[i].ExecutionID, results[i].Attempt = execID, attempt
		}
		for start := 0; start < len(results); start += 500 {
			chunk := results[start:min(start+500, len(results))]
			if _, err := tx.NewInsert().Model(&chunk).On("CONFLICT (execution_id, attempt, seq) DO UPDATE").
				Set("user_id = EXCLUDED.user_id").Set("first_name = EXCLUDED.first_name").
				Set("last_name = EXCLUDED.last_name").Set("email = EXCLUDED.email").
				Set("status = EXCLUDED.status").Set("message = EXCLUDED.message").Exec(ctx); err != nil {
				return fmt.Errorf("insert results: %w", err)
			}
		}
		return refreshCounts(ctx, tx, exec, nil)
	})
}

// refreshCounts recomputes the counts of the execution's current attempt
// and of the execution from the stored results; with status, it also ends
// the attempt and the execution in it.
func refreshCounts(ctx context.Context, tx bun.Tx, exec *Execution, status *ExecutionStatus) error {
	var c struct {
		Success int64 `bun:"s"`
		Failed  int64 `bun:"f"`
	}
	err := tx.NewSelect().Table("mgmt_execution_results").
		ColumnExpr("COALESCE(SUM(CASE WHEN status = ? THEN 1 ELSE 0 END), 0) AS s", ExecResultSuccess).
		ColumnExpr("COALESCE(SUM(CASE WHEN status = ? THEN 1 ELSE 0 END), 0) AS f", ExecResultFailure).
		Where("execution_id = ? AND attempt = ?", exec.ID, exec.Attempt).Scan(ctx, &c.Success, &c.Failed)
	if err != nil {
		return fmt.Errorf("count results: %w", err)
	}
	var earlier int64 // successes of earlier attempts
	if exec.Attempt > 1 {
		err := tx.NewSelect().Table("mgmt_execution_results").ColumnExpr("COUNT(*)").
			Where("execution_id = ? AND attempt < ? AND status = ?", exec.ID, exec.Attempt, ExecResultSuccess).Scan(ctx, &earlier)
		if err != nil {
			return fmt.Errorf("count earlier results: %w", err)
		}
	}
	var att ExecutionAttempt
	if err := tx.NewSelect().Model(&att).Where("execution_id = ? AND attempt = ?", exec.ID, exec.Attempt).Scan(ctx); err != nil {
		return fmt.Errorf("select attempt: %w", err)
	}
	failed := c.Failed
	now := time.Now().UTC()
	uAtt := tx.NewUpdate().Model((*ExecutionAttempt)(nil)).Set("success_count = ?", c.Success).
		Where("execution_id = ? AND attempt = ?", exec.ID, exec.Attempt)
	uExec := tx.NewUpdate().Model((*Execution)(nil)).Set("success_count = ?", earlier+c.Success).
		Set("updated_at = ?", now).Where("id = ?", exec.ID)
	if status != nil {
		// Users the attempt never reached did not succeed either.
		failed = att.Total - c.Success
		final := *status
		if final == ExecCompleted && failed > 0 {
			final = ExecCompletedWithErrors
		}
		uAtt = uAtt.Set("status = ?", final).Set("finished_at = ?", now)
		uExec = uExec.Set("status = ?", final).Set("finished_at = ?", now)
	}
	if _, err := uAtt.Set("failed_count = ?", failed).Exec(ctx); err != nil {
		return fmt.Errorf("update attempt: %w", err)
	}
	if _, err := uExec.Set("failed_count = ?", failed).Exec(ctx); err != nil {
		return fmt.Errorf("update execution: %w", err)
	}
	return nil
}

// FinishAttempt ends the current attempt and the execution in status
// (completed becomes completed_with_errors when a user of the attempt did
// not succeed), counts from the stored results. Finishing a finished
// attempt again changes nothing. ECONFLICT when attempt is not the current
// one.
func (s *MgmtStore) FinishAttempt(ctx context.Context, orgID, execID int64, attempt int, status ExecutionStatus) error {
	if !status.Finished() {
		return models.Invalid("status", "%s is not a final execution state", status)
	}
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		exec, err := lockExecution(ctx, tx, s.d, orgID, execID)
		if err != nil {
			return err
		}
		if exec.Attempt != attempt {
			return models.Errorf(models.ECONFLICT, "attempt %d is not the execution's current attempt (%d)", attempt, exec.Attempt)
		}
		if exec.Status.Finished() {
			return nil
		}
		if err := refreshCounts(ctx, tx, exec, &status); err != nil {
			return err
		}
		return finishAttemptJob(ctx, tx, exec, status)
	})
}

// finishAttemptJob ends the job of the execution's current attempt with
// the attempt, in its transaction, so that the execution and its job are
// never seen in disagreeing states: COMPLETED, WARNING or ERROR by the
// counts (the users never reached count as failed), ERROR when
// interrupted. A job already finished or deleted is left as it is.
func finishAttemptJob(ctx context.Context, tx bun.Tx, exec *Execution, status ExecutionStatus) error {
	var att ExecutionAttempt
	if err := tx.NewSelect().Model(&att).Where("execution_id = ? AND attempt = ?", exec.ID, exec.Attempt).Scan(ctx); err != nil {
		return fmt.Errorf("select attempt: %w", err)
	}
	p := jobs.JobProgress{Processed: att.SuccessCount + att.FailedCount, Total: att.Total, Success: att.SuccessCount, Failed: att.FailedCount}
	jobStatus := jobs.OutcomeStatus(p.Success, p.Failed)
	message := map[jobs.JobStatus]string{jobs.JobCompleted: "every user was processed successfully",
		jobs.JobWarning: "some users failed", jobs.JobError: "no user could be processed"}[jobStatus]
	switch status {
	case ExecTimeOut:
		message = "the execution passed its deadline (IAM_MGMT_EXECUTION_TIMEOUT); the users not reached count as failed"
	case ExecInterrupted:
		jobStatus, message = jobs.JobError, "the execution was interrupted (the job was cancelled or deleted)"
	}
	err := jobs.FinishJob(ctx, tx, exec.OrgID, att.JobID, jobStatus, message, p, EndJob)
	if models.ErrorCode(err) == models.ENOTFOUND {
		return nil
	}
	return err
}

// Retry starts a new attempt of a finished execution over the users its
// current attempt did not succeed for (failed, or never reached), with a
// new QUEUED job, in one transaction; the caller starts the job's workflow
// after. ECONFLICT when the execution is still running or nothing failed.
func (s *MgmtStore) Retry(ctx context.Context, orgID int64, a MgmtAction, execID, by int64) (*Execution, *jobs.Job, error) {
	var exec *Execution
	var job *jobs.Job
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if exec, err = lockExecution(ctx, tx, s.d, orgID, execID); err != nil {
			return err
		}
		if exec.Action != a {
			return ErrExecutionNotFound
		}
		if !exec.Status.Finished() {
			return models.Errorf(models.ECONFLICT, "the execution is %s: only a finished execution can be retried", exec.Status)
		}
		next := exec.Attempt + 1
		src := tx.NewSelect().TableExpr("mgmt_execution_targets AS t").ColumnExpr("t.seq AS k").ColumnExpr("t.user_id AS u").
			Where("t.execution_id = ? AND t.attempt = ?", exec.ID, exec.Attempt).
			Where("NOT EXISTS (SELECT 1 FROM mgmt_execution_results AS r WHERE r.execution_id = t.execution_id AND r.attempt = t.attempt AND r.seq = t.seq AND r.status = ?)", ExecResultSuccess)
		n, err := insertTargets(ctx, tx, exec.ID, next, src)
		if err != nil {
			return err
		}
		if n == 0 {
			return models.Errorf(models.ECONFLICT, "nothing to retry: every user of the execution succeeded")
		}
		job = &jobs.Job{OrgID: orgID, Kind: jobs.MgmtJobKind, Module: MgmtModule, ActionName: actionName(exec.Action) + " (retry)",
			Entity: "User", CreatedBy: by, Total: n}
		if err = jobs.InsertJob(ctx, tx, job); err != nil {
			return err
		}
		now := time.Now().UTC()
		att := &ExecutionAttempt{ExecutionID: exec.ID, Attempt: next, JobID: job.ID, Status: ExecYetToStart,
			Total: n, FailedCount: 0, CreatedBy: by, CreatedAt: now}
		if _, err = tx.NewInsert().Model(att).Exec(ctx); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		before := attemptAudit{Attempt: exec.Attempt, Status: exec.Status, JobID: exec.JobID}
		exec.Attempt, exec.JobID, exec.Status, exec.FinishedAt, exec.UpdatedAt = next, job.ID, ExecYetToStart, nil, now
		if _, err = tx.NewUpdate().Model(exec).Column("attempt", "job_id", "status", "finished_at", "updated_at").
			WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("update execution: %w", err)
		}
		t := executionTarget(exec)
		t.Changes = audit.Changes(before, attemptAudit{Attempt: exec.Attempt, Status: exec.Status, JobID: exec.JobID})
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.ManagementExecutionRetried,
			Targets: []models.EventTarget{t, jobTarget(job)}})
	})
	if err != nil {
		return nil, nil, err
	}
	return exec, job, nil
}

// ExecutionAttempt returns which attempt of an execution attempt names
// (0: the current one). ENOTFOUND when the execution is not the
// organization's and action's, or has no such attempt.
func (s *MgmtStore) ExecutionAttempt(ctx context.Context, orgID int64, a MgmtAction, execID int64, attempt int) (int, error) {
	exec, err := getExecution(ctx, s.db, orgID, a, execID)
	if err != nil {
		return 0, err
	}
	if attempt == 0 {
		attempt = exec.Attempt
	}
	if attempt < 1 || attempt > exec.Attempt {
		return 0, models.NotFound("Attempt", fmt.Sprintf("the execution has attempts 1 to %d", exec.Attempt))
	}
	return attempt, nil
}

// ResultsAfter returns up to limit results of one attempt of an execution
// whose seq is above afterSeq, in seq order: one keyset page of the CSV
// export, read without a transaction held between pages. The caller has
// checked the execution's organization (ExecutionAttempt).
func (s *MgmtStore) ResultsAfter(ctx context.Context, execID int64, attempt int, afterSeq int64, limit int) ([]ExecutionResult, error) {
	var out []ExecutionResult
	err := s.db.NewSelect().Model(&out).Where("execution_id = ? AND attempt = ? AND seq > ?", execID, attempt, afterSeq).
		Order("seq").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select execution results: %w", err)
	}
	return out, nil
}
