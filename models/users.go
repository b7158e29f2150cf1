package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Role decides what a user may grant to an application at the consent page:
// an admin every scope, a user none.
type Role string

// The roles.
const (
	RoleAdmin Role = "admin"
	RoleUser  Role = "user"
)

// User statuses (spec 2.1).
const (
	UserInactive = 0
	UserActive   = 1
)

// User is an identity user: the fields sign-in needs. The users table holds
// the profile of spec 2.1 too; the users API adds the fields it serves.
type User struct {
	bun.BaseModel `bun:"table:users"`

	ID          int64  `bun:"id,pk"`
	OrgID       int64  `bun:"org_id"`
	FirstName   string `bun:"first_name"`
	LastName    string `bun:"last_name"`
	DisplayName string `bun:"display_name"`
	Email       string `bun:"email"`
	Status      int    `bun:"status"`
	Role        Role   `bun:"role"`
	// PasswordHash is the argon2id hash of the password (HashPassword); empty
	// when the user has none and cannot sign in.
	PasswordHash string `bun:"password_hash"`
	// FailedLogins counts failed sign-ins since FirstFailedLoginAt, the start
	// of the current counting window (account blocking, spec 2.12).
	FailedLogins       int        `bun:"failed_logins"`
	FirstFailedLoginAt *time.Time `bun:"first_failed_login_at"`
	// BlockedUntil is the end of a block; BlockedForever for one an
	// administrator must lift.
	BlockedUntil *time.Time `bun:"blocked_until"`
	CreatedAt    time.Time  `bun:"created_at"`
	UpdatedAt    time.Time  `bun:"updated_at"`
}

// IsAdmin reports whether the user holds the admin role.
func (u *User) IsAdmin() bool { return u.Role == RoleAdmin }

// UserStore reads and writes users.
type UserStore struct{ db bun.IDB }

// NewUserStore returns the user store over db.
func NewUserStore(db bun.IDB) *UserStore { return &UserStore{db: db} }

// ErrUserNotFound is the answer for a user that does not exist in the
// caller's organization.
var ErrUserNotFound = NotFound("User", "the user does not exist")

// Create inserts user with password (hashed with argon2id; empty for a user
// without one), filling its id and times. EINVALID when the organization,
// email, role or status is missing or wrong, or the password breaks its
// length rule; ECONFLICT when the email is taken in the organization.
func (s *UserStore) Create(ctx context.Context, user *User, password string) error {
	if user.OrgID == 0 {
		return Invalid("org_id", "is required")
	}
	if err := checkEmail(user.Email); err != nil {
		return err
	}
	switch user.Role {
	case "":
		user.Role = RoleUser
	case RoleAdmin, RoleUser:
	default:
		return Invalid("role", "must be admin or user")
	}
	if user.Status != UserActive && user.Status != UserInactive {
		return Invalid("status", "must be 1 (active) or 0 (inactive)")
	}
	user.PasswordHash = ""
	if password != "" {
		hash, err := HashPassword(password)
		if err != nil {
			return err
		}
		user.PasswordHash = hash
	}
	now := time.Now().UTC()
	user.ID = NewID()
	user.CreatedAt, user.UpdatedAt = now, now
	if _, err := s.db.NewInsert().Model(user).Exec(ctx); err != nil {
		if isUniqueViolation(err) {
			return &Error{Code: ECONFLICT, Field: "email", Detail: "a user with this email already exists in the organization"}
		}
		return fmt.Errorf("insert user: %w", err)
	}
	return nil
}

// checkEmail accepts a bare address (name@domain), nothing more.
func checkEmail(email string) error {
	if email == "" {
		return Invalid("email", "is required")
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Address != email || !strings.Contains(email, "@") {
		return Invalid("email", "must be an email address")
	}
	return nil
}

// Get returns one user of the organization. ENOTFOUND when missing.
func (s *UserStore) Get(ctx context.Context, orgID, id int64) (*User, error) {
	user := new(User)
	err := s.db.NewSelect().Model(user).Where("org_id = ? AND id = ?", orgID, id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrUserNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select user: %w", err)
	}
	return user, nil
}

// GetByEmail returns the user of the organization with this email, compared
// without regard to case. ENOTFOUND when missing.
func (s *UserStore) GetByEmail(ctx context.Context, orgID int64, email string) (*User, error) {
	if email == "" {
		return nil, ErrUserNotFound
	}
	user := new(User)
	err := s.db.NewSelect().Model(user).
		Where("org_id = ? AND lower(email) = lower(?)", orgID, email).
		Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrUserNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select user by email: %w", err)
	}
	return user, nil
}

// HasAdmin reports whether the organization has at least one admin.
func (s *UserStore) HasAdmin(ctx context.Context, orgID int64) (bool, error) {
	ok, err := s.db.NewSelect().Model((*User)(nil)).
		Where("org_id = ? AND role = ?", orgID, RoleAdmin).
		Exists(ctx)
	if err != nil {
		return false, fmt.Errorf("look for an admin: %w", err)
	}
	return ok, nil
}
