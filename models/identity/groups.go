package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/sqldb"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
)

// Group is a group of users of an organization (spec 2.2). A static group's
// members are posted; a dynamic group's members are the users its
// MembershipRule (a filter over user attributes) matches, kept up to date by
// every user write and, after a rule change, by a recompute job.
type Group struct {
	bun.BaseModel `bun:"table:groups"`

	ID          int64  `bun:"id,pk"`
	OrgID       int64  `bun:"org_id"`
	Name        string `bun:"name"`
	Description string `bun:"description"`
	IsDynamic   bool   `bun:"is_dynamic"`
	// MembershipRule is the canonical text of a dynamic group's filter; empty
	// for a static group.
	MembershipRule string `bun:"membership_rule"`
	// RuleVersion counts rule changes; a recompute job works for one version
	// and stops when the rule has changed again.
	RuleVersion int64 `bun:"rule_version"`
	// MembershipJobID is the job that last recomputed the members of a
	// dynamic group; nil for a static one.
	MembershipJobID *int64 `bun:"membership_job_id"`
	// MembersCount is kept by triggers on group_members, so it is right
	// whoever adds or removes members (a user delete included).
	MembersCount int64 `bun:"members_count"`
	// ExternalID is the id a provisioning client (SCIM externalId) keeps
	// for the group; empty when none.
	ExternalID  string    `bun:"external_id"`
	WhenCreated time.Time `bun:"when_created"`
	UpdatedAt   time.Time `bun:"updated_at"`
}

// GroupMember is one membership row.
type GroupMember struct {
	bun.BaseModel `bun:"table:group_members"`

	GroupID int64 `bun:"group_id,pk"`
	UserID  int64 `bun:"user_id,pk"`
	OrgID   int64 `bun:"org_id"`
}

// Limits of group fields and requests.
const (
	MaxGroupNameLen        = 256
	MaxGroupDescriptionLen = 1024
	// MaxMembersPerRequest caps the user ids one request adds or removes.
	MaxMembersPerRequest = 1000
)

// GroupStore reads and writes groups and their members.
type GroupStore struct{ db bun.IDB }

// NewGroupStore returns the GroupStore over db (the database or a transaction).
func NewGroupStore(db bun.IDB) *GroupStore { return &GroupStore{db: db} }

// ErrGroupNotFound is the answer for a group that does not exist in the
// caller's organization.
var ErrGroupNotFound = models.NotFound("Group", "the group does not exist")

// Get returns one group of the organization. ENOTFOUND when missing.
func (s *GroupStore) Get(ctx context.Context, orgID, id int64) (*Group, error) {
	return getGroup(ctx, s.db, orgID, id, false)
}

// getGroup reads a group, locking its row against concurrent writers when
// lock is set (PostgreSQL; SQLite has one writer at a time anyway).
func getGroup(ctx context.Context, db bun.IDB, orgID, id int64, lock bool) (*Group, error) {
	g := new(Group)
	q := db.NewSelect().Model(g).Where("org_id = ? AND id = ?", orgID, id)
	if lock {
		q = sqldb.DialectOf(db).LockRows(q, "NO KEY UPDATE")
	}
	err := q.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrGroupNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select group: %w", err)
	}
	return g, nil
}

// MemberUserIDs returns the ids of the users who are members of any of the
// groups groupIDs of the organization, each once, in ascending order. Ids of
// groups that do not exist in the organization are ignored. For a dynamic
// group the members are those computed from its rule.
func (s *GroupStore) MemberUserIDs(ctx context.Context, orgID int64, groupIDs []int64) ([]int64, error) {
	if len(groupIDs) == 0 {
		return []int64{}, nil
	}
	ids := []int64{}
	err := s.db.NewSelect().Model((*GroupMember)(nil)).
		ColumnExpr("DISTINCT user_id").
		Where("org_id = ? AND group_id IN (?)", orgID, bun.List(groupIDs)).
		OrderExpr("user_id").
		Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("select group members: %w", err)
	}
	return ids, nil
}

// checkGroupFields checks name and description.
func checkGroupFields(g *Group) error {
	g.Name = strings.TrimSpace(g.Name)
	switch {
	case g.Name == "":
		return models.Invalid("name", "is required")
	case utf8.RuneCountInString(g.Name) > MaxGroupNameLen:
		return models.Invalid("name", "must be at most %d characters", MaxGroupNameLen)
	case utf8.RuneCountInString(g.Description) > MaxGroupDescriptionLen:
		return models.Invalid("description", "must be at most %d characters", MaxGroupDescriptionLen)
	case utf8.RuneCountInString(g.ExternalID) > MaxGroupNameLen || !utf8.ValidString(g.ExternalID) || strings.ContainsRune(g.ExternalID, 0):
		return models.Invalid("externalId", "must be valid text of at most %d characters", MaxGroupNameLen)
	}
	return nil
}

// errGroupNameTaken is the answer to a name already used in the organization.
var errGroupNameTaken = &models.Error{Code: models.ECONFLICT, Field: "name", Detail: "a group with this name already exists in the organization"}

// checkMemberCount dedupes member ids and checks how many a request holds.
func checkMemberCount(ids []int64) ([]int64, error) {
	if len(ids) > MaxMembersPerRequest {
		return nil, models.Invalid("members", "must hold at most %d user ids", MaxMembersPerRequest)
	}
	seen := make(map[int64]bool, len(ids))
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// addMembers adds users ids (deduped) to a static group inside tx and
// returns the users that were not members yet (their ids, display names and
// emails), whom it records as group.members_added (the group first).
// EINVALID naming the first id that is not a user of the group's
// organization; nothing is written then.
func addMembers(ctx context.Context, tx bun.Tx, g *Group, ids []int64) ([]User, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var found []User
	err := tx.NewSelect().Model(&found).Column("id", "display_name", "email").
		Where("org_id = ? AND id IN (?)", g.OrgID, bun.List(ids)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select users: %w", err)
	}
	byID := make(map[int64]*User, len(found))
	for i := range found {
		byID[found[i].ID] = &found[i]
	}
	for _, id := range ids {
		if byID[id] == nil {
			return nil, models.Invalid("members", "%s is not a user of the organization", models.FormatID(id))
		}
	}
	rows := make([]GroupMember, len(ids))
	for i, id := range ids {
		rows[i] = GroupMember{GroupID: g.ID, UserID: id, OrgID: g.OrgID}
	}
	var inserted []int64
	err = tx.NewInsert().Model(&rows).On("CONFLICT DO NOTHING").Returning("user_id").Scan(ctx, &inserted)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("insert members: %w", err)
	}
	added := make([]User, 0, len(inserted))
	for _, id := range inserted {
		added = append(added, *byID[id])
	}
	return added, recordMembers(ctx, g, audit.GroupMembersAdded, added)
}

// recordMembers records a membership change of g (typ) naming users after
// the group, MaxEventTargets targets an event. No users, no event.
func recordMembers(ctx context.Context, g *Group, typ string, users []User) error {
	targets := make([]models.EventTarget, len(users))
	for i := range users {
		targets[i] = userTarget(&users[i])
	}
	main := groupTarget(g)
	return recordChunked(ctx, g.OrgID, typ, &main, targets)
}

// errDynamicMembers is the answer to posting or removing members of a
// dynamic group.
var errDynamicMembers = models.Invalid("members", "a dynamic group's members are computed from its membership_rule and cannot be added or removed")

// AddMembers adds users ids of the organization to a static group, in one
// transaction recording group.members_added (the group, then the users
// added), and returns the group. Users already members are left as they
// are and not named. ENOTFOUND when the group is missing; EINVALID when it is
// dynamic, there are too many ids, or one is not a user of the
// organization (nothing is added then).
func (s *GroupStore) AddMembers(ctx context.Context, orgID, groupID int64, ids []int64) (*Group, error) {
	ids, err := checkMemberCount(ids)
	if err != nil {
		return nil, err
	}
	return s.changeMembers(ctx, orgID, groupID, func(ctx context.Context, tx bun.Tx, g *Group) error {
		_, err := addMembers(ctx, tx, g, ids)
		return err
	})
}

// RemoveMembers removes users ids from a static group of the organization,
// recording group.members_removed (the group, then the users removed), and
// returns the group; ids that are not members are ignored. ENOTFOUND
// when the group is missing; EINVALID when it is dynamic or there are too
// many ids.
func (s *GroupStore) RemoveMembers(ctx context.Context, orgID, groupID int64, ids []int64) (*Group, error) {
	ids, err := checkMemberCount(ids)
	if err != nil {
		return nil, err
	}
	return s.changeMembers(ctx, orgID, groupID, func(ctx context.Context, tx bun.Tx, g *Group) error {
		if len(ids) == 0 {
			return nil
		}
		var removed []int64
		err := tx.NewDelete().Model((*GroupMember)(nil)).
			Where("group_id = ? AND user_id IN (?)", g.ID, bun.List(ids)).
			Returning("user_id").Scan(ctx, &removed)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delete members: %w", err)
		}
		if len(removed) == 0 {
			return nil
		}
		var users []User
		err = tx.NewSelect().Model(&users).Column("id", "display_name", "email").
			Where("id IN (?)", bun.List(removed)).OrderExpr("id").Scan(ctx)
		if err != nil {
			return fmt.Errorf("select removed members: %w", err)
		}
		return recordMembers(ctx, g, audit.GroupMembersRemoved, users)
	})
}

// changeMembers runs change on a static group of the organization in a
// transaction and returns the group as it is after. ENOTFOUND when the group
// is missing; EINVALID when it is dynamic.
func (s *GroupStore) changeMembers(ctx context.Context, orgID, groupID int64, change func(context.Context, bun.Tx, *Group) error) (*Group, error) {
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		g, err := getGroup(ctx, tx, orgID, groupID, false)
		if err != nil {
			return err
		}
		if g.IsDynamic {
			return errDynamicMembers
		}
		return change(ctx, tx, g)
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, orgID, groupID)
}

// MemberIDs returns up to limit member ids of a group, ascending. The
// caller has checked the group's organization.
func (s *GroupStore) MemberIDs(ctx context.Context, groupID int64, limit int) ([]int64, error) {
	ids := []int64{}
	err := s.db.NewSelect().Model((*GroupMember)(nil)).Column("user_id").
		Where("group_id = ?", groupID).OrderExpr("user_id").Limit(int64(limit)).Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("select members: %w", err)
	}
	return ids, nil
}
