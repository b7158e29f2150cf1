package management

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/devices"
	"iam/models/identity"
	"iam/models/listing"
	"iam/models/sqldb"
)

// ChunkResult is what ApplyChunk did: the results of the chunk's targets
// (those recorded before included) in seq order, the last seq covered,
// whether no target follows, and the attempt's counts after it.
type ChunkResult struct {
	Results []ExecutionResult
	Last    int64
	Done    bool
	Success int64
	Failed  int64
}

// resultsPerInsert is how many results one INSERT writes.
const resultsPerInsert = 2500

// The messages of per-user results.
const (
	msgMoved        = "moved to %s"
	msgDeleted      = "deleted"
	msgUserNotFound = "not found: the user does not exist (deleted meanwhile?)"
	msgSelf         = "you cannot %s yourself: the execution was started by this user"
	msgLastAdmin    = "the organization's last active administrator cannot be %s"
)

// ApplyChunk runs the execution's current attempt on up to size targets
// after seq afterSeq, in one transaction with their results, so that a
// chunk retried after it committed finds its results and changes nothing
// (a target with a result is never applied again). A user missing from the
// organization fails "not found"; the user who started the execution, and
// the organization's last active administrator, fail with a message saying
// so; the others are moved (container set; dynamic memberships follow) or
// deleted (DeleteUsers: memberships, enrollment data, tokens). ECONFLICT
// when the attempt is not the current one or is no longer running;
// ENOTFOUND when the execution is gone.
func (s *MgmtStore) ApplyChunk(ctx context.Context, orgID, execID int64, attempt int, afterSeq int64, size int) (*ChunkResult, error) {
	out := &ChunkResult{Last: afterSeq}
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		*out = ChunkResult{Last: afterSeq}
		exec, err := lockExecution(ctx, tx, s.d, orgID, execID)
		if err != nil {
			return err
		}
		if exec.Attempt != attempt || exec.Status != ExecPending {
			return models.Errorf(models.ECONFLICT, "attempt %d of the execution is not running (%s)", attempt, exec.Status)
		}
		var targets []ExecutionTarget
		if err = tx.NewSelect().Model(&targets).
			Where("execution_id = ? AND attempt = ? AND seq > ?", execID, attempt, afterSeq).
			Order("seq").Limit(int64(size + 1)).Scan(ctx); err != nil {
			return fmt.Errorf("select targets: %w", err)
		}
		if len(targets) <= size {
			out.Done = true
		} else {
			targets = targets[:size]
		}
		if len(targets) > 0 {
			out.Last = targets[len(targets)-1].Seq
			var caller int64
			if err = tx.NewSelect().Model((*ExecutionAttempt)(nil)).Column("created_by").
				Where("execution_id = ? AND attempt = ?", execID, attempt).Scan(ctx, &caller); err != nil {
				return fmt.Errorf("select attempt: %w", err)
			}
			if out.Results, err = applyTargets(ctx, tx, s.d, exec, caller, targets); err != nil {
				return err
			}
		}
		return countResults(ctx, tx, exec, &out.Success, &out.Failed)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// applyTargets applies the execution to targets that have no result yet
// and returns every target's result; caller is the user who started the
// attempt.
func applyTargets(ctx context.Context, tx bun.Tx, d sqldb.Dialect, exec *Execution, caller int64, targets []ExecutionTarget) ([]ExecutionResult, error) {
	first, last := targets[0].Seq, targets[len(targets)-1].Seq
	var done []ExecutionResult
	if err := tx.NewSelect().Model(&done).
		Where("execution_id = ? AND attempt = ? AND seq BETWEEN ? AND ?", exec.ID, exec.Attempt, first, last).Order("seq").
		Scan(ctx); err != nil {
		return nil, fmt.Errorf("select results: %w", err)
	}
	have := make(map[int64]bool, len(done))
	for _, r := range done {
		have[r.Seq] = true
	}
	var todo []ExecutionTarget
	var ids []int64
	for _, t := range targets {
		if !have[t.Seq] {
			todo = append(todo, t)
			ids = append(ids, t.UserID)
		}
	}
	if len(todo) == 0 {
		return done, nil
	}
	dynamic, err := identity.LockDynamicGroups(ctx, tx, exec.OrgID)
	if err != nil {
		return nil, err
	}
	// The active administrators, locked: two executions cannot each leave
	// the other's last one.
	var admins []identity.User
	q := tx.NewSelect().Model(&admins).Column("id", "container").
		Where("org_id = ? AND role = ? AND status = ?", exec.OrgID, identity.RoleAdmin, identity.UserActive).OrderExpr("id")
	if err := d.LockRows(q, "UPDATE").Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("lock administrators: %w", err)
	}
	var users []identity.User
	if err := tx.NewSelect().Model(&users).Column("id", "first_name", "last_name", "email", "role", "status", "container").
		Where("org_id = ? AND id IN (?)", exec.OrgID, bun.List(ids)).Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("select users: %w", err)
	}
	byID := make(map[int64]*identity.User, len(users))
	for i := range users {
		byID[users[i].ID] = &users[i]
	}
	verb, past := "delete", "deleted"
	if exec.Action == ActionMoveUsers {
		verb, past = "move", "moved"
	}
	results := make([]ExecutionResult, len(todo))
	var apply []int64
	candidates := map[int64]bool{}
	for i, t := range todo {
		r := &results[i]
		r.ExecutionID, r.Attempt, r.Seq, r.UserID = exec.ID, exec.Attempt, t.Seq, t.UserID
		u := byID[t.UserID]
		switch {
		case u == nil:
			r.Status, r.Message = ExecResultFailure, msgUserNotFound
		case u.ID == caller:
			r.Status, r.Message = ExecResultFailure, fmt.Sprintf(msgSelf, verb)
		case candidates[u.ID]:
			// The same user twice in one attempt cannot happen (targets are
			// distinct); kept safe.
			r.Status, r.Message = ExecResultFailure, "the user is named twice"
		default:
			candidates[u.ID] = true
		}
		if u != nil {
			r.FirstName, r.LastName, r.Email = u.FirstName, u.LastName, u.Email
		}
	}
	// Keep one active administrator: one that this chunk does not touch,
	// and (move) that is not already in the target container.
	remaining := 0
	var chunkAdmins []int64
	for _, a := range admins {
		switch {
		case candidates[a.ID]:
			chunkAdmins = append(chunkAdmins, a.ID)
		case exec.Action == ActionMoveUsers && a.Container == exec.TargetContainer:
		default:
			remaining++
		}
	}
	keep := int64(0)
	if remaining == 0 && len(chunkAdmins) > 0 {
		sort.Slice(chunkAdmins, func(i, j int) bool { return chunkAdmins[i] < chunkAdmins[j] })
		keep = chunkAdmins[0]
	}
	for i := range results {
		r := &results[i]
		if r.Status != "" {
			continue
		}
		if r.UserID == keep {
			r.Status, r.Message = ExecResultFailure, fmt.Sprintf(msgLastAdmin, past)
			continue
		}
		apply = append(apply, r.UserID)
	}
	applied := map[int64]bool{}
	if len(apply) > 0 {
		var got []int64
		var err error
		if exec.Action == ActionDeleteUsers {
			got, err = identity.DeleteUsers(ctx, tx, exec.OrgID, apply, devices.UnlinkDeletedUsers)
		} else {
			err = tx.NewUpdate().Model((*identity.User)(nil)).
				Set("container = ?", exec.TargetContainer).Set("updated_at = ?", time.Now().UTC()).
				Where("org_id = ? AND id IN (?)", exec.OrgID, bun.List(apply)).
				Returning("id").Scan(ctx, &got)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, fmt.Errorf("move users: %w", err)
			}
			err = nil
			// A move changes the container alone: only rules naming it
			// can change the users' dynamic memberships.
			if rulesName(dynamic, "container") {
				err = identity.SyncMembership(ctx, tx, exec.OrgID, got)
			}
		}
		if err != nil {
			return nil, err
		}
		for _, id := range got {
			applied[id] = true
		}
	}
	for i := range results {
		r := &results[i]
		if r.Status != "" {
			continue
		}
		if !applied[r.UserID] {
			r.Status, r.Message = ExecResultFailure, msgUserNotFound
			continue
		}
		r.Status = ExecResultSuccess
		if exec.Action == ActionMoveUsers {
			r.Message = fmt.Sprintf(msgMoved, exec.TargetContainer)
		} else {
			r.Message = msgDeleted
		}
	}
	// A batch's results in few statements: each statement costs more than
	// its rows.
	for start := 0; start < len(results); start += resultsPerInsert {
		chunk := results[start:min(start+resultsPerInsert, len(results))]
		if _, err := tx.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			return nil, fmt.Errorf("insert results: %w", err)
		}
	}
	all := append(done, results...)
	sort.Slice(all, func(i, j int) bool { return all[i].Seq < all[j].Seq })
	return all, addCounts(ctx, tx, exec, results)
}

// addCounts adds the new results of a batch to the counts of the
// execution's current attempt and of the execution, in the batch's
// transaction. The results are new (a target with a result is never
// applied again, under the execution's lock), so adding keeps the counts
// those of the stored results without reading them all again, as
// refreshCounts does, for every batch.
func addCounts(ctx context.Context, tx bun.Tx, exec *Execution, results []ExecutionResult) error {
	var success, failed int64
	for _, r := range results {
		if r.Status == ExecResultSuccess {
			success++
		} else {
			failed++
		}
	}
	var attFailed int64
	err := tx.NewUpdate().Model((*ExecutionAttempt)(nil)).
		Set("success_count = success_count + ?", success).Set("failed_count = failed_count + ?", failed).
		Where("execution_id = ? AND attempt = ?", exec.ID, exec.Attempt).Returning("failed_count").Scan(ctx, &attFailed)
	if err != nil {
		return fmt.Errorf("update attempt: %w", err)
	}
	_, err = tx.NewUpdate().Model((*Execution)(nil)).Set("success_count = success_count + ?", success).
		Set("failed_count = ?", attFailed).Set("updated_at = ?", time.Now().UTC()).Where("id = ?", exec.ID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("update execution: %w", err)
	}
	return nil
}

// rulesName reports whether a rule of groups names the user attribute
// attr (a rule that does not parse counts as naming it: its evaluation
// then says what is wrong).
func rulesName(groups []identity.DynamicGroup, attr string) bool {
	for _, g := range groups {
		expr, err := identity.ParseRule(g.Rule)
		if err != nil || exprNames(expr, attr) {
			return true
		}
	}
	return false
}

// exprNames reports whether a filter names attr (attribute names compare
// ignoring case, as the filter language has them). An expression of a kind
// it does not know counts as naming it.
func exprNames(e listing.Expr, attr string) bool {
	switch e := e.(type) {
	case *listing.And:
		return slices.ContainsFunc(e.Terms, func(t listing.Expr) bool { return exprNames(t, attr) })
	case *listing.Or:
		return slices.ContainsFunc(e.Terms, func(t listing.Expr) bool { return exprNames(t, attr) })
	case *listing.Not:
		return exprNames(e.Expr, attr)
	case *listing.Compare:
		return strings.EqualFold(e.Attr.Name, attr)
	case *listing.Present:
		return strings.EqualFold(e.Attr.Name, attr)
	}
	return true
}

// countResults reads the counts of the execution's current attempt.
func countResults(ctx context.Context, tx bun.Tx, exec *Execution, success, failed *int64) error {
	var att ExecutionAttempt
	if err := tx.NewSelect().Model(&att).Where("execution_id = ? AND attempt = ?", exec.ID, exec.Attempt).Scan(ctx); err != nil {
		return fmt.Errorf("select attempt: %w", err)
	}
	*success, *failed = att.SuccessCount, att.FailedCount
	return nil
}

// StartedAttempt is what a job needs to run an execution's attempt.
type StartedAttempt struct {
	ExecutionID     int64
	Attempt         int
	Action          MgmtAction
	TargetContainer string
	Total           int64
	CreatedAt       time.Time
	Success, Failed int64
}

// StartJobAttempt marks the attempt job jobID runs pending (StartAttempt)
// and returns it. ENOTFOUND when the job runs no execution; ECONFLICT when
// the attempt is not the execution's current one or has finished.
func (s *MgmtStore) StartJobAttempt(ctx context.Context, orgID, jobID int64) (*StartedAttempt, error) {
	exec, att, err := s.ExecutionByJob(ctx, orgID, jobID)
	if err != nil {
		return nil, err
	}
	if err := s.StartAttempt(ctx, orgID, exec.ID, att.Attempt); err != nil {
		return nil, err
	}
	return &StartedAttempt{ExecutionID: exec.ID, Attempt: att.Attempt, Action: exec.Action, TargetContainer: exec.TargetContainer,
		Total: att.Total, CreatedAt: att.CreatedAt, Success: att.SuccessCount, Failed: att.FailedCount}, nil
}
