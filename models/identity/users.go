package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/sqldb"
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

//go:generate go run ../../cmd/usergen -part models -src users.go -out users_gen.go

// User is an identity user (spec 2.1): the profile, the sign-in state and
// the role. Columns are snake_case; the API shows the fields camelCase.
//
// User is the one place a user attribute is declared: its api tag (package
// iam/models/usergen) says whether the API shows it and under which name,
// whether requests may write it, lists filter and sort on it and checkUser
// checks its length. go generate writes from it the list scanner, the
// listing allow-list and the length checks here (users_gen.go) and the
// view, the JSON writer and the request fields in package api; the tests
// fail when those files fall behind it (TestUserCodeGenerated).
type User struct {
	bun.BaseModel `bun:"table:users"`

	ID              int64  `bun:"id,pk" api:"id,filter,sort"`
	OrgID           int64  `bun:"org_id" api:"-"`
	FirstName       string `bun:"first_name" api:"firstName,write,filter,sort,max=MaxUserFieldLen"`
	LastName        string `bun:"last_name" api:"lastName,write,filter,sort,max=MaxUserFieldLen"`
	DisplayName     string `bun:"display_name" api:"displayName,write,filter,sort,max=MaxUserFieldLen"`
	Email           string `bun:"email" api:"email,write,filter,sort"`
	EmployeeID      string `bun:"employee_id" api:"employeeID,write,filter,sort,max=MaxUserFieldLen"`
	Title           string `bun:"title" api:"title,write,filter,sort,max=MaxUserFieldLen"`
	Department      string `bun:"department" api:"department,write,filter,sort,max=MaxUserFieldLen"`
	Company         string `bun:"company" api:"company,write,filter,sort,max=MaxUserFieldLen"`
	Description     string `bun:"description" api:"description,write,filter,max=MaxUserDescriptionLen"`
	ManagerID       *int64 `bun:"manager_id" api:"manager,write,filter"`
	City            string `bun:"city" api:"city,write,filter,sort,max=MaxUserFieldLen"`
	StateProvince   string `bun:"state_province" api:"stateProvince,write,filter,sort,max=MaxUserFieldLen"`
	Street          string `bun:"street" api:"street,write,filter,max=MaxUserFieldLen"`
	ZipPostal       string `bun:"zip_postal" api:"zipPostal,write,filter,max=MaxUserFieldLen"`
	PostOfficeBox   string `bun:"post_office_box" api:"postOfficeBox,write,filter,max=MaxUserFieldLen"`
	WorkLocation    string `bun:"work_location" api:"workLocation,write,filter,sort,max=MaxUserFieldLen"`
	SeatingLocation string `bun:"seating_location" api:"seatingLocation,write,filter,max=MaxUserFieldLen"`
	Country         string `bun:"country" api:"country,write,filter,sort"`
	MobileNumber    string `bun:"mobile_number" api:"mobileNumber,write,filter,max=MaxUserPhoneLen"`
	HomePhone       string `bun:"home_phone" api:"homePhone,write,filter,max=MaxUserPhoneLen"`
	TelephoneNumber string `bun:"telephone_number" api:"telephoneNumber,write,filter,max=MaxUserPhoneLen"`
	Fax             string `bun:"fax" api:"fax,write,filter,max=MaxUserPhoneLen"`
	Gender          string `bun:"gender" api:"gender,write,filter,sort"`
	Language        string `bun:"language" api:"language,write,filter,sort"`
	// UserName is the SCIM userName (docs/scim.md): unique in the
	// organization ignoring case; Create sets it to the email when empty.
	UserName string `bun:"user_name" api:"-"`
	// ExternalID is the id a provisioning client (SCIM externalId) keeps
	// for the user; empty when none.
	ExternalID string `bun:"external_id" api:"-"`
	// Container is the user's place in the directory, a distinguished name
	// in RFC 4514 syntax (OU=Sales,DC=example,DC=com; CheckContainer); empty
	// when the user has none. The move-users management action sets it.
	Container string `bun:"container" api:"container,write,filter,sort,max=MaxUserContainerLen"`
	// IsDomainVerified is set by the system, never by a request.
	IsDomainVerified bool `bun:"is_domain_verified" api:"isDomainVerified,filter,sort"`
	Status           int  `bun:"status" api:"status,write,filter,sort"`
	// IsLicensed tells whether the user holds a license (the licensing
	// parameter of GET /users).
	IsLicensed bool `bun:"is_licensed" api:"isLicensed,write,filter,sort"`
	// PrimarySource is where the record comes from when a directory
	// provides it; nil for users made in this service.
	PrimarySource *PrimarySource `bun:"primary_source,type:json" api:"primarySource,custom"`
	Role          Role           `bun:"role" api:"-,nolist"`
	// PasswordHash is the argon2id hash of the password (secret.HashPassword); empty
	// when the user has none and cannot sign in.
	PasswordHash string `bun:"password_hash" api:"-,nolist"`
	// FailedLogins counts failed sign-ins since FirstFailedLoginAt, the start
	// of the current counting window (account blocking, spec 2.12).
	FailedLogins       int        `bun:"failed_logins" api:"-,nolist"`
	FirstFailedLoginAt *time.Time `bun:"first_failed_login_at" api:"-,nolist"`
	// BlockedUntil is the end of a block; BlockedForever for one an
	// administrator must lift.
	BlockedUntil *time.Time `bun:"blocked_until" api:"-,nolist"`
	// TokensValidAfter ends every token and sign-in of the user issued
	// before it: a password change, deactivation or demotion sets it (and
	// deletes the user's tokens). Nil when never set.
	TokensValidAfter *time.Time `bun:"tokens_valid_after" api:"-,nolist"`
	CreatedAt        time.Time  `bun:"created_at" api:"-"`
	UpdatedAt        time.Time  `bun:"updated_at" api:"-"`
}

// PrimarySource is the directory a user record comes from (spec 2.1).
type PrimarySource struct {
	ID                 string             `json:"id"`
	ApplicationName    string             `json:"applicationName"`
	ApplicationService ApplicationService `json:"applicationService"`
	IsEnabled          bool               `json:"isEnabled"`
	CreationTime       time.Time          `json:"creationTime"`
	ModifiedTime       time.Time          `json:"modifiedTime"`
}

// ApplicationService names the application behind a PrimarySource.
type ApplicationService struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	ServiceName string `json:"serviceName"`
	Logo        string `json:"logo"`
}

// IsAdmin reports whether the user holds the admin role.
func (u *User) IsAdmin() bool { return u.Role == RoleAdmin }

// UserStore reads and writes users.
type UserStore struct {
	db           bun.IDB
	beforeDelete UsersDeletedFunc // see BeforeDelete
}

// UsersDeletedFunc is what another area does in the transaction that
// deletes users ids of an organization, before their rows go (devices
// unlink the local accounts linked to them).
type UsersDeletedFunc func(ctx context.Context, tx bun.Tx, orgID int64, ids []int64) error

// BeforeDelete makes the store call fn in the transaction that deletes
// users, before the rows go. NewStore wires it; it returns s.
func (s *UserStore) BeforeDelete(fn UsersDeletedFunc) *UserStore {
	s.beforeDelete = fn
	return s
}

// NewUserStore returns the UserStore over db (the database or a transaction).
func NewUserStore(db bun.IDB) *UserStore { return &UserStore{db: db} }

// ErrUserNotFound is the answer for a user that does not exist in the
// caller's organization.
var ErrUserNotFound = models.NotFound("User", "the user does not exist")

// Create inserts user with password (hashed with argon2id; empty for a user
// without one), filling its id and times, and puts the user in every dynamic
// group of the organization whose rule it matches, in one transaction that
// records user.created (a password given here is part of the creation: no
// user.password_changed).
// EINVALID when the organization, email, role, status or another field
// breaks its rule (checkUser), the manager is not a user of the
// organization, or the password breaks its length rule; ECONFLICT when the
// email or employee id is taken in the organization.
func (s *UserStore) Create(ctx context.Context, user *User, password string) error {
	if user.OrgID == 0 {
		return models.Invalid("org_id", "is required")
	}
	if user.Role == "" {
		user.Role = RoleUser
	}
	if user.UserName == "" {
		user.UserName = user.Email
	}
	if err := checkUser(user); err != nil {
		return err
	}
	user.PasswordHash = ""
	if password != "" {
		hash, err := hashPassword(password)
		if err != nil {
			return err
		}
		user.PasswordHash = hash
	}
	now := time.Now().UTC()
	user.ID = sqldb.NewID()
	user.CreatedAt, user.UpdatedAt = now, now
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		// Every user write locks the dynamic groups first, then (through
		// triggers) the organization's user count: one order, no deadlock.
		if _, err := LockDynamicGroups(ctx, tx, user.OrgID); err != nil {
			return err
		}
		if err := checkManager(ctx, tx, user); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(user).Exec(ctx); err != nil {
			return userWriteError(err, "insert user", user)
		}
		if err := models.Record(ctx, models.AuditEvent{OrgID: user.OrgID, Type: audit.UserCreated,
			Targets: []models.EventTarget{userTarget(user)}}); err != nil {
			return err
		}
		return SyncMembership(ctx, tx, user.OrgID, []int64{user.ID})
	})
}

// userWriteError explains a failed insert or update of u: a taken email,
// employee id or userName is ECONFLICT naming the field. A userName equal
// to the email (its default) that is taken is told as the email: the
// database may report either index first.
func userWriteError(err error, what string, u *User) error {
	if !sqldb.IsUniqueViolation(err) {
		return fmt.Errorf("%s: %w", what, err)
	}
	if strings.Contains(err.Error(), "employee") {
		return &models.Error{Code: models.ECONFLICT, Field: "employeeID", Detail: "a user with this employee id already exists in the organization"}
	}
	if strings.Contains(err.Error(), "user_name") && !strings.EqualFold(u.UserName, u.Email) {
		return &models.Error{Code: models.ECONFLICT, Field: "userName", Detail: "a user with this userName already exists in the organization"}
	}
	return &models.Error{Code: models.ECONFLICT, Field: "email", Detail: "a user with this email already exists in the organization"}
}

// checkEmail accepts a bare address (name@domain), nothing more.
func checkEmail(email string) error {
	if email == "" {
		return models.Invalid("email", "is required")
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Address != email || !strings.Contains(email, "@") {
		return models.Invalid("email", "must be an email address")
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

// ByIDs returns the users of the organization among ids, by id.
func (s *UserStore) ByIDs(ctx context.Context, orgID int64, ids []int64) (map[int64]*User, error) {
	out := map[int64]*User{}
	if len(ids) == 0 {
		return out, nil
	}
	var users []User
	if err := s.db.NewSelect().Model(&users).Where("org_id = ? AND id IN (?)", orgID, bun.List(ids)).Scan(ctx); err != nil {
		return nil, models.Unavailable(fmt.Errorf("select users: %w", err))
	}
	for i := range users {
		out[users[i].ID] = &users[i]
	}
	return out, nil
}
