package identity

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
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

// Organization is a tenant. Every other row belongs to exactly one.
type Organization struct {
	bun.BaseModel `bun:"table:organizations"`

	ID        int64     `bun:"id,pk"`
	Name      string    `bun:"name"`
	TimeZone  string    `bun:"time_zone"`
	CreatedAt time.Time `bun:"created_at"`
}

// OrgStore reads and writes organizations.
type OrgStore struct{ db bun.IDB }

// NewOrgStore returns the OrgStore over db (the database or a transaction).
func NewOrgStore(db bun.IDB) *OrgStore { return &OrgStore{db: db} }

// MaxOrgNameLen caps an organization's name, in characters.
const MaxOrgNameLen = 200

// Create inserts org, filling its id and creation time, and records
// org.created with it. EINVALID when the name is empty (or spaces), longer
// than MaxOrgNameLen or no valid text, or the time zone unknown. Most
// callers want Store.CreateOrganization, which gives the organization its
// first admin too.
func (s *OrgStore) Create(ctx context.Context, org *Organization) error {
	switch {
	case strings.TrimSpace(org.Name) == "":
		return models.Invalid("name", "is required")
	case utf8.RuneCountInString(org.Name) > MaxOrgNameLen:
		return models.Invalid("name", "must be at most %d characters", MaxOrgNameLen)
	case !utf8.ValidString(org.Name) || strings.ContainsRune(org.Name, 0):
		return models.Invalid("name", "must be valid text")
	}
	if org.TimeZone == "" {
		org.TimeZone = "UTC"
	}
	if _, err := time.LoadLocation(org.TimeZone); err != nil {
		return models.Invalid("time_zone", "unknown time zone %q", org.TimeZone)
	}
	org.ID = sqldb.NewID()
	org.CreatedAt = time.Now().UTC()
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(org).Exec(ctx); err != nil {
			return fmt.Errorf("insert organization: %w", err)
		}
		return models.Record(ctx, models.AuditEvent{OrgID: org.ID, Type: audit.OrgCreated,
			Targets: []models.EventTarget{audit.Target(OrgTargetType, org.ID, org.Name)}})
	})
}

// Get returns one organization. ENOTFOUND when missing.
func (s *OrgStore) Get(ctx context.Context, id int64) (*Organization, error) {
	org := new(Organization)
	err := s.db.NewSelect().Model(org).Where("id = ?", id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, models.NotFound("Organization", "the organization does not exist")
	}
	if err != nil {
		return nil, fmt.Errorf("select organization: %w", err)
	}
	return org, nil
}

// First returns the oldest organization, or ENOTFOUND when there is none yet.
func (s *OrgStore) First(ctx context.Context) (*Organization, error) {
	org := new(Organization)
	err := s.db.NewSelect().Model(org).Order("id").Limit(1).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, models.NotFound("Organization", "no organization exists yet")
	}
	if err != nil {
		return nil, fmt.Errorf("select organization: %w", err)
	}
	return org, nil
}

// List returns every organization, oldest first.
func (s *OrgStore) List(ctx context.Context) ([]Organization, error) {
	out := []Organization{}
	if err := s.db.NewSelect().Model(&out).Order("id").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list organizations: %w", err)
	}
	return out, nil
}

// FirstAdmin is the administrator an organization starts with.
type FirstAdmin struct {
	Email string
	// Password is the admin's password; empty, one is generated.
	Password string
}

// CreateOrganization makes org with everything an organization starts with
// (today: its first admin, FirstAdmin of admin), in one transaction, so that
// no organization is left without a way in. It is the one path of every
// organization: the first one of `iam dev` and `iam serve`, those of
// `iam orgs create`, and the tests' second organizations. It returns the
// admin and the password generated for it ("" when admin.Password was given).
// EINVALID for an empty name or an invalid email or password.
func (s *OrgStore) CreateOrganization(ctx context.Context, org *Organization, admin FirstAdmin) (*User, string, error) {
	var (
		user      *User
		generated string
	)
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := NewOrgStore(tx).Create(ctx, org); err != nil {
			return err
		}
		var err error
		user, generated, err = NewUserStore(tx).AddFirstAdmin(ctx, org.ID, admin)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return user, generated, nil
}

// AddFirstAdmin makes an organization's first administrator: active, role
// admin, display name "Administrator", with admin.Password or a generated
// one, which it returns ("" when admin.Password was given). ECONFLICT when a
// user has that email already.
func (s *UserStore) AddFirstAdmin(ctx context.Context, orgID int64, admin FirstAdmin) (*User, string, error) {
	password, generated := admin.Password, ""
	if password == "" {
		raw := make([]byte, 15)
		_, _ = rand.Read(raw)
		password = base64.RawURLEncoding.EncodeToString(raw)
		generated = password
	}
	u := &User{OrgID: orgID, Email: admin.Email, DisplayName: "Administrator", Role: RoleAdmin, Status: UserActive}
	if err := s.Create(ctx, u, password); err != nil {
		return nil, "", err
	}
	return u, generated, nil
}
