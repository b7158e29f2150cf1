package modeltest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/store"
)

// NewOrg makes an organization named Org.
func NewOrg(t *testing.T, store *store.Store) *identity.Organization {
	t.Helper()
	org := &identity.Organization{Name: "Org"}
	if err := store.Orgs.Create(context.Background(), org); err != nil {
		t.Fatal(err)
	}
	return org
}

// NewJob makes a queued diagnostic job of org.
func NewJob(t *testing.T, store *store.Store, org *identity.Organization) *jobs.Job {
	t.Helper()
	job := &jobs.Job{OrgID: org.ID, Kind: "Diagnostic", Module: "System", ActionName: "Diagnostic", Input: json.RawMessage(`{"items":3}`)}
	if err := store.Jobs.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	return job
}

// AddUser creates a user of org through the store, failing the test on error.
func AddUser(t *testing.T, users *identity.UserStore, orgID int64, u identity.User) *identity.User {
	t.Helper()
	u.OrgID = orgID
	if u.Status == 0 {
		u.Status = identity.UserActive
	}
	if err := users.Create(t.Context(), &u, ""); err != nil {
		t.Fatalf("create %s: %v", u.Email, err)
	}
	return &u
}

// NewUser makes an active user with a password.
func NewUser(t *testing.T, db *bun.DB, orgID int64, email string, role identity.Role) *identity.User {
	t.Helper()
	u := &identity.User{OrgID: orgID, Email: email, Role: role, Status: identity.UserActive}
	if err := store.NewStore(db).Users.Create(t.Context(), u, "correct horse battery"); err != nil {
		t.Fatalf("create user %s: %v", email, err)
	}
	return u
}

// WantCode fails the test unless err has the domain error code code.
func WantCode(t *testing.T, err error, code string) {
	t.Helper()
	if models.ErrorCode(err) != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
}
