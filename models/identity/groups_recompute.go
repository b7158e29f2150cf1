package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/sqldb"

	"github.com/uptrace/bun"
)

// RecomputeBatchResult is the outcome of one recompute batch.
type RecomputeBatchResult struct {
	// Next is the id of the last user the batch covered: the After of the
	// next batch.
	Next int64
	// Users is how many users the batch covered.
	Users int64
	// Done tells that the batch reached the last user.
	Done bool
	// Stopped, when not empty, tells why the recompute must end without
	// writing: the group was deleted or its rule changed again.
	Stopped string
}

// Reasons a recompute stops early.
const (
	RecomputeGroupGone  = "the group was deleted"
	RecomputeSuperseded = "the membership rule changed again; a newer job recomputes the group"
)

// CountUsers returns how many users the organization has.
func (s *UserStore) CountUsers(ctx context.Context, orgID int64) (int64, error) {
	n, err := s.db.NewSelect().Model((*User)(nil)).Where("org_id = ?", orgID).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return int64(n), nil
}

// RecomputeBatch recomputes the members of a dynamic group among the
// organization's users with ids after after, up to size of them in id
// order, in one transaction holding the group's row: set-based, one DELETE
// of the members the rule no longer matches and one INSERT … SELECT of the
// users it matches. It works for one rule version and reports Stopped when
// the group is gone or its rule has changed since. Running a batch twice
// leaves the same rows.
func (s *GroupStore) RecomputeBatch(ctx context.Context, orgID, groupID, ruleVersion, after int64, size int) (RecomputeBatchResult, error) {
	var res RecomputeBatchResult
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		res = RecomputeBatchResult{}
		g, err := getGroup(ctx, tx, orgID, groupID, true)
		switch {
		case models.ErrorCode(err) == models.ENOTFOUND:
			res.Stopped = RecomputeGroupGone
			return nil
		case err != nil:
			return err
		case !g.IsDynamic || g.RuleVersion != ruleVersion:
			res.Stopped = RecomputeSuperseded
			return nil
		}
		where, args, err := ruleWhere(tx, g.MembershipRule)
		if err != nil {
			return err
		}
		// The batch's upper bound: the size-th user after after, if any.
		var upper int64
		err = tx.NewSelect().Model((*User)(nil)).Column("id").
			Where("org_id = ? AND id > ?", orgID, after).
			OrderExpr("id").Offset(int64(size-1)).Limit(1).Scan(ctx, &upper)
		if errors.Is(err, sql.ErrNoRows) {
			res.Done = true
		} else if err != nil {
			return fmt.Errorf("bound recompute batch: %w", err)
		}
		bound := "id > ?"
		boundArgs := []any{after}
		if !res.Done {
			bound += " AND id <= ?"
			boundArgs = append(boundArgs, upper)
		}
		memberBound := "user_id > ?"
		if !res.Done {
			memberBound += " AND user_id <= ?"
		}

		delArgs := append([]any{groupID}, boundArgs...)
		delArgs = append(delArgs, args...)
		_, err = tx.ExecContext(ctx, "DELETE FROM group_members WHERE group_id = ? AND "+memberBound+
			" AND NOT EXISTS (SELECT 1 FROM users WHERE users.id = group_members.user_id AND ("+where+"))", delArgs...)
		if err != nil {
			return fmt.Errorf("delete members the rule no longer matches: %w", err)
		}
		insArgs := append([]any{groupID, orgID}, boundArgs...)
		insArgs = append(insArgs, args...)
		_, err = tx.ExecContext(ctx, "INSERT INTO group_members (group_id, user_id, org_id) SELECT ?, id, org_id FROM users"+
			" WHERE org_id = ? AND "+bound+" AND ("+where+") ON CONFLICT DO NOTHING", insArgs...)
		if err != nil {
			return fmt.Errorf("insert members the rule matches: %w", err)
		}
		if res.Done {
			n, err := tx.NewSelect().Model((*User)(nil)).Where("org_id = ? AND id > ?", orgID, after).Count(ctx)
			if err != nil {
				return fmt.Errorf("count recompute batch: %w", err)
			}
			res.Users, res.Next = int64(n), after
			return nil
		}
		res.Users, res.Next = int64(size), upper
		return nil
	})
	return res, err
}
