package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/sqldb"
)

// GroupEdit is what Edit changes of a static or dynamic group in one
// transaction: its fields (nil stays), then its members. Members change
// only on a static group.
type GroupEdit struct {
	Name        *string
	Description *string
	ExternalID  *string
	// ReplaceMembers, when not nil, makes these user ids the members
	// (removing every other member) before Add and Remove apply.
	ReplaceMembers *[]int64
	// RemoveAll removes every member before Add applies.
	RemoveAll bool
	Add       []int64
	Remove    []int64
	// Check, when set, sees the group as it is, locked, before anything
	// changes; an error it returns aborts the edit (a stale If-Match).
	Check func(*Group) error
}

// changesMembers reports whether e touches the members.
func (e *GroupEdit) changesMembers() bool {
	return e.ReplaceMembers != nil || e.RemoveAll || len(e.Add) > 0 || len(e.Remove) > 0
}

// memberChunk is how many member ids one statement adds or removes.
const memberChunk = 1000

// Edit applies e to a group of the organization in one transaction: its
// fields recorded as group.updated (with the fields it changed), members
// removed as group.members_removed and added as group.members_added
// (MaxEventTargets targets an event), each set-based in chunks of 1,000 ids
// whatever their number, so that 10,000 members change in one request. It
// returns the group as it is after. ENOTFOUND when missing; EINVALID when
// a field breaks its rule, members change on a dynamic group (the field
// "members"), or an added id is not a user of the organization (nothing is
// written then); ECONFLICT when the name is taken; Check's error.
func (s *GroupStore) Edit(ctx context.Context, orgID, id int64, e GroupEdit) (*Group, error) {
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		g, err := getGroup(ctx, tx, orgID, id, true)
		if err != nil {
			return err
		}
		if e.Check != nil {
			if err := e.Check(g); err != nil {
				return err
			}
		}
		if e.changesMembers() && g.IsDynamic {
			return errDynamicMembers
		}
		if err := editGroupFields(ctx, tx, g, e); err != nil {
			return err
		}
		return editMembers(ctx, tx, g, e)
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, orgID, id)
}

// editGroupFields saves e's field changes of g (and the time, whenever
// anything changes), recording group.updated when a field was given.
func editGroupFields(ctx context.Context, tx bun.Tx, g *Group, e GroupEdit) error {
	fields := e.Name != nil || e.Description != nil || e.ExternalID != nil
	if !fields && !e.changesMembers() {
		return nil
	}
	before := groupAuditOf(g)
	if e.Name != nil {
		g.Name = *e.Name
	}
	if e.Description != nil {
		g.Description = *e.Description
	}
	if e.ExternalID != nil {
		g.ExternalID = *e.ExternalID
	}
	if err := checkGroupFields(g); err != nil {
		return err
	}
	g.UpdatedAt = time.Now().UTC()
	_, err := tx.NewUpdate().Model(g).Column("name", "description", "external_id", "updated_at").WherePK().Exec(ctx)
	if sqldb.IsUniqueViolation(err) {
		return errGroupNameTaken
	}
	if err != nil {
		return fmt.Errorf("update group: %w", err)
	}
	if !fields {
		return nil
	}
	target := groupTarget(g)
	target.Changes = audit.Changes(before, groupAuditOf(g))
	return models.Record(ctx, models.AuditEvent{OrgID: g.OrgID, Type: audit.GroupUpdated, Targets: []models.EventTarget{target}})
}

// editMembers applies e's member changes to the static group g.
func editMembers(ctx context.Context, tx bun.Tx, g *Group, e GroupEdit) error {
	add := dedupe(e.Add)
	var removed []int64
	switch {
	case e.RemoveAll:
		err := tx.NewDelete().Model((*GroupMember)(nil)).Where("group_id = ?", g.ID).Returning("user_id").Scan(ctx, &removed)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delete members: %w", err)
		}
	case e.ReplaceMembers != nil:
		keep := dedupe(*e.ReplaceMembers)
		q := tx.NewDelete().Model((*GroupMember)(nil)).Where("group_id = ?", g.ID)
		if len(keep) > 0 {
			// The kept members are few next to what a replace removes, or
			// the statement is chunked: NOT IN a temporary list is simplest
			// where the list fits; larger replaces remove all and re-add.
			if len(keep) <= memberChunk {
				q = q.Where("user_id NOT IN (?)", bun.List(keep))
			}
		}
		err := q.Returning("user_id").Scan(ctx, &removed)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delete members: %w", err)
		}
		add = dedupe(append(keep, add...))
	}
	for start := 0; start < len(e.Remove); start += memberChunk {
		chunk := e.Remove[start:min(start+memberChunk, len(e.Remove))]
		var gone []int64
		err := tx.NewDelete().Model((*GroupMember)(nil)).
			Where("group_id = ? AND user_id IN (?)", g.ID, bun.List(chunk)).
			Returning("user_id").Scan(ctx, &gone)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delete members: %w", err)
		}
		removed = append(removed, gone...)
	}
	var addedBack map[int64]bool
	if e.ReplaceMembers != nil && len(removed) > 0 {
		addedBack = map[int64]bool{}
	}
	var added []User
	for start := 0; start < len(add); start += memberChunk {
		a, err := addMembers(ctx, tx, g, add[start:min(start+memberChunk, len(add))])
		if err != nil {
			return err
		}
		added = append(added, a...)
	}
	if addedBack != nil {
		// A large replace removed members it re-added: those neither left
		// nor joined.
		for _, u := range added {
			addedBack[u.ID] = true
		}
	}
	return recordRemoved(ctx, tx, g, removed, addedBack)
}

// recordRemoved records group.members_removed naming the users removed
// (but those in back, removed and added again in the same edit).
func recordRemoved(ctx context.Context, tx bun.Tx, g *Group, removed []int64, back map[int64]bool) error {
	ids := make([]int64, 0, len(removed))
	for _, id := range dedupe(removed) {
		if !back[id] {
			ids = append(ids, id)
		}
	}
	var users []User
	for start := 0; start < len(ids); start += memberChunk {
		var chunk []User
		err := tx.NewSelect().Model(&chunk).Column("id", "display_name", "email").
			Where("id IN (?)", bun.List(ids[start:min(start+memberChunk, len(ids))])).OrderExpr("id").Scan(ctx)
		if err != nil {
			return fmt.Errorf("select removed members: %w", err)
		}
		users = append(users, chunk...)
	}
	return recordMembers(ctx, g, audit.GroupMembersRemoved, users)
}

// dedupe returns ids without repeats, in their first order.
func dedupe(ids []int64) []int64 {
	seen := make(map[int64]bool, len(ids))
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// CreateStatic inserts a static group with members (user ids of the
// organization, any number: added set-based in chunks of 1,000) in one
// transaction recording group.created, then group.members_added. EINVALID
// when a field breaks its rule or a member is not a user of the
// organization (nothing is written then); ECONFLICT when the name is taken.
func (s *GroupStore) CreateStatic(ctx context.Context, g *Group, members []int64) error {
	g.IsDynamic, g.MembershipRule = false, ""
	if err := checkGroupFields(g); err != nil {
		return err
	}
	members = dedupe(members)
	now := time.Now().UTC()
	g.ID = sqldb.NewID()
	g.WhenCreated, g.UpdatedAt = now, now
	g.MembersCount, g.RuleVersion, g.MembershipJobID = 0, 0, nil
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := models.Record(ctx, models.AuditEvent{OrgID: g.OrgID, Type: audit.GroupCreated,
			Targets: []models.EventTarget{groupTarget(g)}}); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(g).Exec(ctx); err != nil {
			if sqldb.IsUniqueViolation(err) {
				return errGroupNameTaken
			}
			return fmt.Errorf("insert group: %w", err)
		}
		for start := 0; start < len(members); start += memberChunk {
			added, err := addMembers(ctx, tx, g, members[start:min(start+memberChunk, len(members))])
			if err != nil {
				return err
			}
			g.MembersCount += int64(len(added))
		}
		return nil
	})
}
