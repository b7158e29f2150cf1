package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
	MembersCount int64     `bun:"members_count"`
	WhenCreated  time.Time `bun:"when_created"`
	UpdatedAt    time.Time `bun:"updated_at"`
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

// NewGroupStore returns the group store over db.
func NewGroupStore(db bun.IDB) *GroupStore { return &GroupStore{db: db} }

// ErrGroupNotFound is the answer for a group that does not exist in the
// caller's organization.
var ErrGroupNotFound = NotFound("Group", "the group does not exist")

// Get returns one group of the organization. ENOTFOUND when missing.
func (s *GroupStore) Get(ctx context.Context, orgID, id int64) (*Group, error) {
	return getGroup(ctx, s.db, orgID, id, false)
}

// getGroup reads a group, locking its row against concurrent writers when
// lock is set (PostgreSQL; SQLite has one writer at a time anyway).
func getGroup(ctx context.Context, db bun.IDB, orgID, id int64, lock bool) (*Group, error) {
	g := new(Group)
	q := db.NewSelect().Model(g).Where("org_id = ? AND id = ?", orgID, id)
	if lock && IsPostgres(db) {
		q = q.For("NO KEY UPDATE")
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
		Where("org_id = ? AND group_id IN (?)", orgID, bun.In(groupIDs)).
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
		return Invalid("name", "is required")
	case utf8.RuneCountInString(g.Name) > MaxGroupNameLen:
		return Invalid("name", "must be at most %d characters", MaxGroupNameLen)
	case utf8.RuneCountInString(g.Description) > MaxGroupDescriptionLen:
		return Invalid("description", "must be at most %d characters", MaxGroupDescriptionLen)
	}
	return nil
}

// errGroupNameTaken is the answer to a name already used in the organization.
var errGroupNameTaken = &Error{Code: ECONFLICT, Field: "name", Detail: "a group with this name already exists in the organization"}
