package notification

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/identity"
	"iam/models/sqldb"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
)

// NotificationSchedule is a notification auto-schedule (spec 2.15): on its
// calendar, the members of its groups who have not enrolled are sent its
// template. Its calendar lives in a Temporal Schedule (id
// NotificationScheduleID); the row is the truth for everything else.
type NotificationSchedule struct {
	bun.BaseModel `bun:"table:notification_schedules"`

	ID          int64            `bun:"id,pk"`
	OrgID       int64            `bun:"org_id"`
	Name        string           `bun:"name"`
	Description string           `bun:"description"`
	TemplateID  int64            `bun:"template_id"`
	GroupIDs    []int64          `bun:"group_ids,type:json"`
	IsEnabled   bool             `bun:"is_enabled"`
	Settings    ScheduleSettings `bun:"settings,type:json"`
	CreatedBy   int64            `bun:"created_by"`
	CreatedAt   time.Time        `bun:"created_at"`
	UpdatedAt   time.Time        `bun:"updated_at"`
}

// NotificationScheduleID is the id of the Temporal Schedule of schedule id.
func NotificationScheduleID(id int64) string { return "notify-schedule-" + models.FormatID(id) }

// Limits of schedule fields.
const (
	MaxScheduleNameLen        = 100
	MaxScheduleDescriptionLen = 500
	MaxScheduleGroups         = 100
)

// ErrScheduleNotFound answers for a schedule that does not exist in the
// organization.
var ErrScheduleNotFound = models.NotFound("Schedule", "the notification schedule does not exist")

// GroupMembers is what notifications need of groups: the users in them.
// *GroupStore implements it.
type GroupMembers interface {
	// MemberUserIDs returns the ids of the members of any of groupIDs of
	// the organization, each once, ascending; unknown groups are ignored.
	MemberUserIDs(ctx context.Context, orgID int64, groupIDs []int64) ([]int64, error)
}

// NotificationStore reads and writes notification schedules, their runs
// and deliveries.
type NotificationStore struct {
	db bun.IDB
	// Groups lists group members (the group store).
	Groups GroupMembers
	// Templates reads the templates runs send.
	Templates *TemplateStore
	// writes queues the delivery ledger's writes where the database has one
	// writer (Dialect.QueueWrites).
	writes sync.Mutex
}

// NewNotificationStore returns the NotificationStore over db, reading group
// members from groups and templates from templates.
func NewNotificationStore(db bun.IDB, groups GroupMembers, templates *TemplateStore) *NotificationStore {
	return &NotificationStore{db: db, Groups: groups, Templates: templates}
}

// SyncFunc mirrors a schedule write elsewhere (its Temporal Schedule) from
// inside the write's transaction: when it fails, the write is rolled back.
// prev is nil on create; next is nil on delete.
type SyncFunc func(ctx context.Context, prev, next *NotificationSchedule) error

// CreateSchedule checks sc and inserts it, filling its id and times, then
// calls sync inside the transaction. EINVALID when a field breaks a rule
// (the template and every group must exist in the organization); ECONFLICT
// when the name is taken.
func (s *NotificationStore) CreateSchedule(ctx context.Context, sc *NotificationSchedule, userID int64, sync SyncFunc) error {
	sc.ID = sqldb.NewID()
	now := time.Now().UTC()
	sc.CreatedAt, sc.UpdatedAt = now, now
	return sqldb.InTxOnce(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := s.checkSchedule(ctx, tx, sc, userID); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(sc).Exec(ctx); err != nil {
			return scheduleWriteError(err)
		}
		if err := record(ctx, sc.OrgID, audit.ScheduleCreated, scheduleTarget(sc)); err != nil {
			return err
		}
		return sync(ctx, nil, sc)
	})
}

// GetSchedule returns one schedule of the organization. ENOTFOUND when
// missing.
func (s *NotificationStore) GetSchedule(ctx context.Context, orgID, id int64) (*NotificationSchedule, error) {
	return s.getSchedule(ctx, s.db, orgID, id, false)
}

func (s *NotificationStore) getSchedule(ctx context.Context, db bun.IDB, orgID, id int64, forUpdate bool) (*NotificationSchedule, error) {
	sc := new(NotificationSchedule)
	q := db.NewSelect().Model(sc).Where("org_id = ? AND id = ?", orgID, id)
	if forUpdate {
		q = sqldb.DialectOf(db).LockRows(q, "UPDATE")
	}
	err := q.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrScheduleNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select notification schedule: %w", err)
	}
	return sc, nil
}

// UpdateSchedule changes a schedule: change receives a copy of the current
// one and returns the new one, which is checked and written, then sync runs
// inside the transaction. ENOTFOUND, EINVALID, ECONFLICT as CreateSchedule.
func (s *NotificationStore) UpdateSchedule(ctx context.Context, orgID, id, userID int64, change func(cur NotificationSchedule) (*NotificationSchedule, error), sync SyncFunc) (*NotificationSchedule, error) {
	var out *NotificationSchedule
	err := sqldb.InTxOnce(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		prev, err := s.getSchedule(ctx, tx, orgID, id, true)
		if err != nil {
			return err
		}
		was := scheduleSnapshot(prev)
		next, err := change(*prev)
		if err != nil {
			return err
		}
		next.ID, next.OrgID, next.CreatedBy, next.CreatedAt = prev.ID, prev.OrgID, prev.CreatedBy, prev.CreatedAt
		next.UpdatedAt = time.Now().UTC()
		if err := s.checkSchedule(ctx, tx, next, userID); err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model(next).WherePK().Exec(ctx); err != nil {
			return scheduleWriteError(err)
		}
		if err := recordScheduleUpdate(ctx, was, next); err != nil {
			return err
		}
		out = next
		return sync(ctx, prev, next)
	})
	return out, err
}

// DeleteSchedule removes a schedule, calling sync inside the transaction.
// Its runs and their delivery log stay. ENOTFOUND when missing.
func (s *NotificationStore) DeleteSchedule(ctx context.Context, orgID, id int64, sync SyncFunc) error {
	return sqldb.InTxOnce(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		prev, err := s.getSchedule(ctx, tx, orgID, id, true)
		if err != nil {
			return err
		}
		if _, err := tx.NewDelete().Model(prev).WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("delete notification schedule: %w", err)
		}
		if err := record(ctx, orgID, audit.ScheduleDeleted, scheduleTarget(prev)); err != nil {
			return err
		}
		return sync(ctx, prev, nil)
	})
}

// RequestRun asks for a run of the schedule now: it records
// schedule.run_requested and calls trigger (which asks the workflow engine
// for the run) inside one transaction, so that a trigger that fails leaves
// no event; it is not run again on a transient error, as a trigger is not
// idempotent. The run itself is the schedule's work and records no event
// of its own. It returns the schedule. ENOTFOUND when missing (trigger is
// not called).
func (s *NotificationStore) RequestRun(ctx context.Context, orgID, id int64, trigger func(ctx context.Context, sc *NotificationSchedule) error) (*NotificationSchedule, error) {
	var out *NotificationSchedule
	err := sqldb.InTxOnce(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		sc, err := s.getSchedule(ctx, tx, orgID, id, true)
		if err != nil {
			return err
		}
		if err := record(ctx, orgID, audit.ScheduleRunRequested, scheduleTarget(sc)); err != nil {
			return err
		}
		out = sc
		return trigger(ctx, sc)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkSchedule validates sc in place: its fields, its settings, its
// template (one userID may see) and its groups (all of the organization).
func (s *NotificationStore) checkSchedule(ctx context.Context, tx bun.Tx, sc *NotificationSchedule, userID int64) error {
	var p models.Problems
	sc.Name = strings.TrimSpace(sc.Name)
	switch n := utf8.RuneCountInString(sc.Name); {
	case n == 0:
		p.Add("name", "is required")
	case n > MaxScheduleNameLen:
		p.Add("name", "must be at most %d characters", MaxScheduleNameLen)
	}
	if utf8.RuneCountInString(sc.Description) > MaxScheduleDescriptionLen {
		p.Add("description", "must be at most %d characters", MaxScheduleDescriptionLen)
	}
	if _, err := sc.Settings.Check("schedule_settings"); err != nil {
		var e *models.Error
		if errors.As(err, &e) {
			for _, c := range e.Causes {
				p.Add(c.Title, "%s", c.Detail)
			}
		}
	}
	if sc.TemplateID == 0 {
		p.Add("notification_template_id", "is required")
	} else if _, err := s.Templates.get(ctx, tx, sc.OrgID, userID, sc.TemplateID, false); err != nil {
		if models.ErrorCode(err) != models.ENOTFOUND {
			return err
		}
		p.Add("notification_template_id", "names no notification template of the organization")
	}
	switch {
	case len(sc.GroupIDs) == 0:
		p.Add("groups", "must name at least one group")
	case len(sc.GroupIDs) > MaxScheduleGroups:
		p.Add("groups", "must name at most %d groups", MaxScheduleGroups)
	default:
		existing, err := existingGroups(ctx, tx, sc.OrgID, sc.GroupIDs)
		if err != nil {
			return err
		}
		seen := map[int64]bool{}
		for i, id := range sc.GroupIDs {
			switch {
			case seen[id]:
				p.Add(fmt.Sprintf("groups[%d]", i), "names group %d twice", id)
			case !existing[id]:
				p.Add(fmt.Sprintf("groups[%d]", i), "names no group of the organization")
			}
			seen[id] = true
		}
	}
	return p.Result()
}

// existingGroups returns which of ids are groups of the organization.
func existingGroups(ctx context.Context, db bun.IDB, orgID int64, ids []int64) (map[int64]bool, error) {
	out := map[int64]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	var found []int64
	err := db.NewSelect().Model((*identity.Group)(nil)).Column("id").
		Where("org_id = ? AND id IN (?)", orgID, bun.List(ids)).Scan(ctx, &found)
	if err != nil {
		return nil, fmt.Errorf("select groups: %w", err)
	}
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}

func scheduleWriteError(err error) error {
	if sqldb.IsUniqueViolation(err) {
		return &models.Error{Code: models.ECONFLICT, Field: "name", Detail: "a notification schedule with this name exists"}
	}
	return fmt.Errorf("write notification schedule: %w", err)
}

// ScheduleRefs are what schedule responses show of other rows: template
// names, creator names, and which listed groups still exist.
type ScheduleRefs struct {
	TemplateNames map[int64]string
	UserNames     map[int64]string
	Groups        map[int64]bool
}

// ExistingGroups returns the schedule's groups that still exist.
func (r ScheduleRefs) ExistingGroups(sc *NotificationSchedule) []int64 {
	out := []int64{}
	for _, id := range sc.GroupIDs {
		if r.Groups[id] {
			out = append(out, id)
		}
	}
	return out
}

// Refs reads the ScheduleRefs of schedules, in three queries.
func (s *NotificationStore) Refs(ctx context.Context, orgID int64, schedules []NotificationSchedule) (ScheduleRefs, error) {
	refs := ScheduleRefs{TemplateNames: map[int64]string{}, UserNames: map[int64]string{}}
	var templateIDs, userIDs, groupIDs []int64
	for _, sc := range schedules {
		templateIDs = append(templateIDs, sc.TemplateID)
		userIDs = append(userIDs, sc.CreatedBy)
		groupIDs = append(groupIDs, sc.GroupIDs...)
	}
	if len(schedules) == 0 {
		refs.Groups = map[int64]bool{}
		return refs, nil
	}
	var templates []Template
	err := s.db.NewSelect().Model(&templates).Column("id", "name").
		Where("org_id = ? AND id IN (?)", orgID, bun.List(uniq(templateIDs))).Scan(ctx)
	if err != nil {
		return refs, fmt.Errorf("select template names: %w", err)
	}
	for _, t := range templates {
		refs.TemplateNames[t.ID] = t.Name
	}
	if refs.UserNames, err = userNames(ctx, s.db, orgID, uniq(userIDs)); err != nil {
		return refs, err
	}
	refs.Groups, err = existingGroups(ctx, s.db, orgID, uniq(groupIDs))
	return refs, err
}

func uniq(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
