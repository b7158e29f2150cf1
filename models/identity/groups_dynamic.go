package identity

import (
	"context"
	"fmt"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"iam/models"
	"iam/models/listing"
	"iam/models/sqldb"
)

// A dynamic group's membership rule is a filter in the list filter language
// over the filterable attributes of users (UserListing), such as
// department eq "Sales" and country eq "DE". Its members are exactly the
// users of the organization the rule matches, kept so by two writers:
//
//   - every user write (create, update, delete) re-evaluates the user against
//     the organization's dynamic groups in its own transaction (SyncMembership;
//     a delete cascades);
//   - a rule change recomputes the whole group in a job, batch by batch
//     (RecomputeBatch).
//
// Both lock the group rows they evaluate (FOR NO KEY UPDATE, in id order, on
// PostgreSQL; SQLite has one writer at a time), so a batch never decides on a
// user row another transaction is changing.

// ParseMembershipRule parses a membership rule and checks it against the
// user attributes, returning its canonical text. EINVALID on field
// "membership_rule" naming the problem.
func ParseMembershipRule(rule string) (string, error) {
	expr, err := ParseRule(rule)
	if err != nil {
		return "", err
	}
	return expr.String(), nil
}

// ruleCacheSize bounds the per-process cache of parsed rules: rule text
// comes from requests, so the cache must not grow with it. A rule dropped
// from the cache is parsed again when next used.
const ruleCacheSize = 1024

// ruleCache maps a canonical or given rule text to its parsed rule.
var ruleCache = func() *lru.Cache[string, listing.Expr] {
	c, err := lru.New[string, listing.Expr](ruleCacheSize)
	if err != nil { // only a size below one fails
		panic(err)
	}
	return c
}()

func ParseRule(rule string) (listing.Expr, error) {
	if e, ok := ruleCache.Get(rule); ok {
		return e, nil
	}
	if strings.TrimSpace(rule) == "" {
		return nil, models.Invalid("membership_rule", "is required for a dynamic group")
	}
	expr, err := listing.ParseFilter(rule)
	if err == nil {
		_, _, err = UserListing.Where(dialect.PG, expr)
	}
	if err != nil {
		return nil, models.Invalid("membership_rule", "%v", err)
	}
	ruleCache.Add(rule, expr)
	return expr, nil
}

// ruleWhere renders a stored rule as SQL over the users table for db.
func ruleWhere(db bun.IDB, rule string) (string, []any, error) {
	expr, err := ParseRule(rule)
	if err != nil {
		return "", nil, err
	}
	return UserListing.Where(db.Dialect().Name(), expr)
}

// DynamicGroup is a dynamic group as membership evaluation needs it.
type DynamicGroup struct {
	ID   int64  `bun:"id"`
	Rule string `bun:"membership_rule"`
}

// LockDynamicGroups returns the organization's dynamic groups, locked in id
// order on PostgreSQL.
func LockDynamicGroups(ctx context.Context, tx bun.IDB, orgID int64) ([]DynamicGroup, error) {
	var groups []DynamicGroup
	q := tx.NewSelect().Model((*Group)(nil)).Column("id", "membership_rule").
		Where("org_id = ? AND is_dynamic", orgID).OrderExpr("id")
	q = sqldb.DialectOf(tx).LockRows(q, "NO KEY UPDATE")
	if err := q.Scan(ctx, &groups); err != nil {
		return nil, fmt.Errorf("select dynamic groups: %w", err)
	}
	return groups, nil
}

// SyncMembership makes the memberships of users userIDs in the
// organization's dynamic groups match the groups' rules, inside the
// caller's transaction.
func SyncMembership(ctx context.Context, tx bun.Tx, orgID int64, userIDs []int64) error {
	if len(userIDs) == 0 {
		return nil
	}
	groups, err := LockDynamicGroups(ctx, tx, orgID)
	if err != nil || len(groups) == 0 {
		return err
	}
	// One statement tells, for each user, which rules it matches: a
	// column per group, 1 or 0.
	var cols []string
	var args []any
	for _, g := range groups {
		where, wargs, ruleErr := ruleWhere(tx, g.Rule)
		if ruleErr != nil {
			return fmt.Errorf("rule of group %d: %w", g.ID, ruleErr)
		}
		cols = append(cols, "CASE WHEN "+where+" THEN 1 ELSE 0 END")
		args = append(args, wargs...)
	}
	args = append(args, orgID, bun.List(userIDs))
	rows, err := tx.QueryContext(ctx,
		"SELECT id, "+strings.Join(cols, ", ")+" FROM users WHERE org_id = ? AND id IN (?)", args...)
	if err != nil {
		return fmt.Errorf("evaluate membership rules: %w", err)
	}
	defer func() { _ = rows.Close() }() // rows.Err reports the read's errors
	want := map[[2]int64]bool{}
	for rows.Next() {
		vals := make([]int64, len(groups)+1)
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("read membership rules: %w", err)
		}
		for i, g := range groups {
			if vals[i+1] == 1 {
				want[[2]int64{g.ID, vals[0]}] = true
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read membership rules: %w", err)
	}
	_ = rows.Close() // read to the end: rows.Err above reported its errors
	return applyMembership(ctx, tx, orgID, groups, userIDs, want)
}

// applyMembership writes the difference between the users' current
// memberships in groups and want.
func applyMembership(ctx context.Context, tx bun.Tx, orgID int64, groups []DynamicGroup, userIDs []int64, want map[[2]int64]bool) error {
	groupIDs := make([]int64, len(groups))
	for i, g := range groups {
		groupIDs[i] = g.ID
	}
	var have []GroupMember
	err := tx.NewSelect().Model(&have).
		Where("user_id IN (?) AND group_id IN (?)", bun.List(userIDs), bun.List(groupIDs)).Scan(ctx)
	if err != nil {
		return fmt.Errorf("select memberships: %w", err)
	}
	var gone []GroupMember
	for _, m := range have {
		key := [2]int64{m.GroupID, m.UserID}
		if want[key] {
			delete(want, key)
		} else {
			gone = append(gone, m)
		}
	}
	for _, m := range gone {
		if _, err := tx.NewDelete().Model((*GroupMember)(nil)).
			Where("group_id = ? AND user_id = ?", m.GroupID, m.UserID).Exec(ctx); err != nil {
			return fmt.Errorf("delete membership: %w", err)
		}
	}
	if len(want) == 0 {
		return nil
	}
	add := make([]GroupMember, 0, len(want))
	for key := range want {
		add = append(add, GroupMember{GroupID: key[0], UserID: key[1], OrgID: orgID})
	}
	if _, err := tx.NewInsert().Model(&add).On("CONFLICT DO NOTHING").Exec(ctx); err != nil {
		return fmt.Errorf("insert memberships: %w", err)
	}
	return nil
}
