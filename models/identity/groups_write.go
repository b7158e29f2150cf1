package identity

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/jobs"
	"iam/models/sqldb"
	"time"

	"github.com/uptrace/bun"
)

// RecomputeInput is the input of a membership recompute job: the group and
// the version of its rule the job computes.
type RecomputeInput struct {
	GroupID     int64 `json:"group_id,string"`
	RuleVersion int64 `json:"rule_version"`
}

// Create inserts a group, filling its id and times, and records
// group.created (then group.members_added for its members). A static group
// gets members (user ids of the organization); a dynamic group gets its
// membership computed by job, which Create writes QUEUED in the same
// transaction (its Kind, Module and ActionName set by the caller; its input
// a RecomputeInput), for the caller to launch after. EINVALID when a field
// breaks its rule, a member is not a user of the organization, or members
// are given for a dynamic group; ECONFLICT when the name is taken.
func (s *GroupStore) Create(ctx context.Context, g *Group, members []int64, job *jobs.Job) error {
	if err := checkGroupFields(g); err != nil {
		return err
	}
	if g.IsDynamic {
		if len(members) > 0 {
			return models.Invalid("members", "cannot be given for a dynamic group; its rule computes them")
		}
		if job == nil {
			return models.Invalid("membership_rule", "a dynamic group needs a recompute job")
		}
		rule, err := ParseMembershipRule(g.MembershipRule)
		if err != nil {
			return err
		}
		g.MembershipRule = rule
	} else if g.MembershipRule != "" {
		return models.Invalid("membership_rule", "is only for dynamic groups (is_dynamic: true)")
	}
	members, err := checkMemberCount(members)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	g.ID = sqldb.NewID()
	g.WhenCreated, g.UpdatedAt = now, now
	g.MembersCount, g.RuleVersion, g.MembershipJobID = 0, 0, nil
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		// The group's event first, then its recompute job's and members'.
		if err := models.Record(ctx, models.AuditEvent{OrgID: g.OrgID, Type: audit.GroupCreated,
			Targets: []models.EventTarget{groupTarget(g)}}); err != nil {
			return err
		}
		if g.IsDynamic {
			g.RuleVersion = 1
			if err := s.queueRecompute(ctx, tx, g, job); err != nil {
				return err
			}
		}
		if _, err := tx.NewInsert().Model(g).Exec(ctx); err != nil {
			if sqldb.IsUniqueViolation(err) {
				return errGroupNameTaken
			}
			return fmt.Errorf("insert group: %w", err)
		}
		added, err := addMembers(ctx, tx, g, members)
		g.MembersCount = int64(len(added))
		return err
	})
}

// queueRecompute writes job as the QUEUED recompute of g's current rule
// version and records it on g (the caller saves g).
func (s *GroupStore) queueRecompute(ctx context.Context, tx bun.Tx, g *Group, job *jobs.Job) error {
	input, err := json.Marshal(RecomputeInput{GroupID: g.ID, RuleVersion: g.RuleVersion})
	if err != nil {
		return err
	}
	job.OrgID, job.Input, job.Entity = g.OrgID, input, "group"
	if err := jobs.InsertJob(ctx, tx, job); err != nil {
		return err
	}
	g.MembershipJobID = &job.ID
	return nil
}

// GroupChange is what Update changes; nil fields stay as they are.
type GroupChange struct {
	Name           *string
	Description    *string
	MembershipRule *string
	// ExternalID is the SCIM externalId.
	ExternalID *string
}

// Update changes a group of the organization, recording group.updated with
// the fields it changed (name, description, membership_rule; none when it
// rewrote them with their values). A new membership rule (of a
// dynamic group) writes job QUEUED in the same transaction to recompute
// the members; job is left unwritten (ID 0) when the rule does not change.
// ENOTFOUND when missing; EINVALID when a field breaks its rule or a rule is
// given for a static group; ECONFLICT when the name is taken.
func (s *GroupStore) Update(ctx context.Context, orgID, id int64, ch GroupChange, job *jobs.Job) (*Group, error) {
	var out *Group
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		g, err := getGroup(ctx, tx, orgID, id, true)
		if err != nil {
			return err
		}
		before := groupAuditOf(g)
		if ch.Name != nil {
			g.Name = *ch.Name
		}
		if ch.Description != nil {
			g.Description = *ch.Description
		}
		if ch.ExternalID != nil {
			g.ExternalID = *ch.ExternalID
		}
		if err = checkGroupFields(g); err != nil {
			return err
		}
		if ch.MembershipRule != nil {
			if !g.IsDynamic {
				return models.Invalid("membership_rule", "is only for dynamic groups; a static group's members are posted")
			}
			var rule string
			if rule, err = ParseMembershipRule(*ch.MembershipRule); err != nil {
				return err
			}
			if rule != g.MembershipRule {
				if job == nil {
					return models.Invalid("membership_rule", "a rule change needs a recompute job")
				}
				g.MembershipRule = rule
				g.RuleVersion++
				if err = s.queueRecompute(ctx, tx, g, job); err != nil {
					return err
				}
			}
		}
		g.UpdatedAt = time.Now().UTC()
		_, err = tx.NewUpdate().Model(g).
			Column("name", "description", "external_id", "membership_rule", "rule_version", "membership_job_id", "updated_at").
			WherePK().Exec(ctx)
		if sqldb.IsUniqueViolation(err) {
			return errGroupNameTaken
		}
		if err != nil {
			return fmt.Errorf("update group: %w", err)
		}
		target := groupTarget(g)
		target.Changes = audit.Changes(before, groupAuditOf(g))
		out = g
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.GroupUpdated,
			Targets: []models.EventTarget{target}})
	})
	if err != nil {
		return nil, err
	}
	// members_count may have moved since the row was read: read it again.
	return s.Get(ctx, orgID, out.ID)
}

// Delete removes a group of the organization and its memberships.
// ENOTFOUND when missing.
func (s *GroupStore) Delete(ctx context.Context, orgID, id int64) error {
	deleted, err := s.DeleteMany(ctx, orgID, []int64{id})
	if err != nil {
		return err
	}
	if len(deleted) == 0 {
		return ErrGroupNotFound
	}
	return nil
}

// DeleteIf is Delete of a group that check accepts: the group is read and
// locked in the delete's transaction and given to check, whose error is
// returned with nothing deleted (a conditional delete: SCIM's If-Match).
// check may run more than once (InTx).
func (s *GroupStore) DeleteIf(ctx context.Context, orgID, id int64, check func(*Group) error) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		g := new(Group)
		err := sqldb.DialectOf(tx).LockRows(tx.NewSelect().Model(g).Where("org_id = ? AND id = ?", orgID, id), "UPDATE").Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrGroupNotFound
		}
		if err != nil {
			return fmt.Errorf("select group: %w", err)
		}
		if err = check(g); err != nil {
			return err
		}
		_, err = deleteGroupsTx(ctx, tx, orgID, []int64{id})
		return err
	})
}

// DeleteMany removes the groups ids of the organization that exist, with
// their memberships, in one transaction recording group.deleted naming each
// (MaxEventTargets groups an event), and returns the ids it removed.
// A recompute job of a removed group ends at its next batch.
func (s *GroupStore) DeleteMany(ctx context.Context, orgID int64, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return []int64{}, nil
	}
	var deleted []int64
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) (err error) {
		deleted, err = deleteGroupsTx(ctx, tx, orgID, ids)
		return err
	})
	if err != nil {
		return nil, err
	}
	return deleted, nil
}

// deleteGroupsTx is DeleteMany inside tx.
func deleteGroupsTx(ctx context.Context, tx bun.Tx, orgID int64, ids []int64) ([]int64, error) {
	var gone []Group
	err := tx.NewDelete().Model((*Group)(nil)).
		Where("org_id = ? AND id IN (?)", orgID, bun.List(ids)).
		Returning("id, name").
		Scan(ctx, &gone)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("delete groups: %w", err)
	}
	deleted := make([]int64, len(gone))
	targets := make([]models.EventTarget, len(gone))
	for i := range gone {
		deleted[i] = gone[i].ID
		targets[i] = groupTarget(&gone[i])
	}
	return deleted, recordChunked(ctx, orgID, audit.GroupDeleted, nil, targets)
}
