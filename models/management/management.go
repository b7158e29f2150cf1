package management

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/listing"
	"iam/models/sqldb"
)

// MgmtAction is a management action on users (spec 2.16, 4.5), by its path
// form.
type MgmtAction string

// The management actions.
const (
	ActionMoveUsers   MgmtAction = "move-users"
	ActionDeleteUsers MgmtAction = "delete-users"
)

// ParseMgmtAction reads an action id: the path form (move-users,
// delete-users) or the singular the spec lists (move-user, delete-user).
func ParseMgmtAction(s string) (MgmtAction, bool) {
	switch s {
	case "move-users", "move-user":
		return ActionMoveUsers, true
	case "delete-users", "delete-user":
		return ActionDeleteUsers, true
	}
	return "", false
}

// ErrMgmtActionNotFound answers an unknown action id.
var ErrMgmtActionNotFound = models.NotFound("Action", "no such management action: the actions are move-users and delete-users")

// MgmtStore keeps management actions' view columns, uploads and executions.
type MgmtStore struct {
	db   *bun.DB
	d    sqldb.Dialect
	jobs *jobs.JobStore // creates the resolving jobs of large uploads
}

// NewMgmtStore returns the MgmtStore over db, creating jobs with jobs.
func NewMgmtStore(db *bun.DB, jobs *jobs.JobStore) *MgmtStore {
	return &MgmtStore{db: db, d: sqldb.DialectOf(db), jobs: jobs}
}

// MaxViewColumns is the most columns a view may show.
const MaxViewColumns = 40

// DefaultViewColumns are the columns an action shows until an organization
// picks its own.
func DefaultViewColumns(a MgmtAction) []string {
	if a == ActionMoveUsers {
		return []string{"firstName", "lastName", "email", "container"}
	}
	return []string{"firstName", "lastName", "email", "employeeID"}
}

// ViewColumnNames are the names a view column may take: every user
// attribute the API shows except id (always shown) and primarySource
// (an object, not a column).
func ViewColumnNames() []string {
	out := make([]string, 0, len(identity.UserAttributes))
	for _, a := range identity.UserAttributes {
		if a.Name != "primarySource" && a.Name != "id" {
			out = append(out, a.Name)
		}
	}
	return out
}

type mgmtViewColumns struct {
	bun.BaseModel `bun:"table:mgmt_view_columns"`

	OrgID     int64      `bun:"org_id,pk"`
	Action    MgmtAction `bun:"action,pk"`
	Columns   []string   `bun:"columns,type:json"`
	UpdatedAt time.Time  `bun:"updated_at"`
}

// ViewColumns returns the columns the organization shows for the action:
// its own choice, or DefaultViewColumns.
func (s *MgmtStore) ViewColumns(ctx context.Context, orgID int64, a MgmtAction) ([]string, error) {
	return viewColumns(ctx, s.db, orgID, a)
}

func viewColumns(ctx context.Context, db bun.IDB, orgID int64, a MgmtAction) ([]string, error) {
	row := new(mgmtViewColumns)
	err := db.NewSelect().Model(row).Where("org_id = ? AND action = ?", orgID, a).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return DefaultViewColumns(a), nil
	}
	if err != nil {
		return nil, fmt.Errorf("select view columns: %w", err)
	}
	return row.Columns, nil
}

// SetViewColumns replaces the organization's columns for the action and
// returns them, recording management.view_columns_updated with the columns
// before and after. EINVALID (field columns) when the list is empty, longer
// than MaxViewColumns, names a column twice or names one that is not a user
// attribute (ViewColumnNames).
func (s *MgmtStore) SetViewColumns(ctx context.Context, orgID int64, a MgmtAction, columns []string) ([]string, error) {
	if err := checkViewColumns(columns); err != nil {
		return nil, err
	}
	type view struct {
		Columns []string `json:"columns"`
	}
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		before, err := viewColumns(ctx, tx, orgID, a)
		if err != nil {
			return err
		}
		row := &mgmtViewColumns{OrgID: orgID, Action: a, Columns: columns, UpdatedAt: time.Now().UTC()}
		_, err = tx.NewInsert().Model(row).
			On("CONFLICT (org_id, action) DO UPDATE").
			Set("columns = EXCLUDED.columns").Set("updated_at = EXCLUDED.updated_at").
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("write view columns: %w", err)
		}
		t := viewTarget(a)
		t.Changes = audit.Changes(view{before}, view{columns})
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.ManagementViewColumnsUpdated, Targets: []models.EventTarget{t}})
	})
	if err != nil {
		return nil, err
	}
	return columns, nil
}

func checkViewColumns(columns []string) error {
	if len(columns) == 0 {
		return models.Invalid("columns", "must name at least one column")
	}
	if len(columns) > MaxViewColumns {
		return models.Invalid("columns", "must name at most %d columns", MaxViewColumns)
	}
	known := map[string]bool{}
	for _, n := range ViewColumnNames() {
		known[n] = true
	}
	seen := map[string]bool{}
	for _, c := range columns {
		if !known[c] {
			return models.Invalid("columns", "%q is not a user attribute; the columns are %s", truncate(c, 64), strings.Join(ViewColumnNames(), ", "))
		}
		if seen[c] {
			return models.Invalid("columns", "%q is named twice", c)
		}
		seen[c] = true
	}
	return nil
}

// truncate cuts s to n bytes at most, marking a cut with an ellipsis.
func truncate(s string, n int) string {
	if t, cut := models.Truncate(s, n); cut {
		return t + "…"
	}
	return s
}

// ListData returns a page of the organization's users for an action's data
// (MgmtDataListing: offset paging, filter over user attributes).
func (s *MgmtStore) ListData(ctx context.Context, orgID int64, p listing.Params) ([]identity.User, listing.Meta, error) {
	var users []identity.User
	q := s.db.NewSelect().Model(&users).ExcludeColumn(identity.SignInColumns...).Where("org_id = ?", orgID)
	meta, err := listing.Fetch(ctx, q, &users, MgmtDataListing, p)
	return users, meta, err
}

// SelectedUsers tells which of ids the action's current selection holds:
// the MAPPED rows of upload uploadID or, when it is 0, of the
// organization's latest upload for the action (none: nothing is
// selected). ENOTFOUND when uploadID is not the organization's and
// action's.
func (s *MgmtStore) SelectedUsers(ctx context.Context, orgID int64, a MgmtAction, uploadID int64, ids []int64) (map[int64]bool, error) {
	out := map[int64]bool{}
	if uploadID != 0 {
		if _, err := getUpload(ctx, s.db, orgID, a, uploadID); err != nil {
			return nil, err
		}
	} else {
		err := s.db.NewSelect().Model((*MgmtUpload)(nil)).Column("id").
			Where("org_id = ? AND action = ?", orgID, a).OrderExpr("created_at DESC, id DESC").Limit(1).Scan(ctx, &uploadID)
		if errors.Is(err, sql.ErrNoRows) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("select latest upload: %w", err)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	var selected []int64
	err := s.db.NewSelect().Model((*UploadRow)(nil)).Column("user_id").
		Where("upload_id = ? AND status = ? AND user_id IN (?)", uploadID, RowMapped, bun.List(ids)).Scan(ctx, &selected)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("select selected users: %w", err)
	}
	for _, id := range selected {
		out[id] = true
	}
	return out, nil
}
