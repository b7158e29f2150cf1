package identity_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/store"
)

func TestUserStore_Create(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		orgs := store.NewStore(db).Orgs
		orgA, orgB := &identity.Organization{Name: "A"}, &identity.Organization{Name: "B"}
		for _, o := range []*identity.Organization{orgA, orgB} {
			if err := orgs.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		users := store.NewStore(db).Users
		if ok, err := users.HasAdmin(ctx, orgA.ID); err != nil || ok {
			t.Fatalf("HasAdmin on an empty organization = %v, %v", ok, err)
		}
		admin := &identity.User{OrgID: orgA.ID, Email: "Admin@Example.com", Role: identity.RoleAdmin, Status: identity.UserActive}
		if err := users.Create(ctx, admin, "a long password"); err != nil {
			t.Fatalf("Create: %v", err)
		}
		if !strings.HasPrefix(admin.PasswordHash, "$argon2id$") {
			t.Errorf("password stored as %q, want an argon2id hash", admin.PasswordHash)
		}
		if ok, _ := users.HasAdmin(ctx, orgA.ID); !ok {
			t.Error("HasAdmin = false after creating an admin")
		}

		got, err := users.GetByEmail(ctx, orgA.ID, "admin@example.COM")
		if err != nil || got.ID != admin.ID || !got.IsAdmin() {
			t.Errorf("GetByEmail ignoring case = %+v, %v", got, err)
		}
		if _, err := users.GetByEmail(ctx, orgB.ID, "admin@example.com"); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("GetByEmail in another organization = %v, want ENOTFOUND", err)
		}
		if _, err := users.Get(ctx, orgB.ID, admin.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("Get in another organization = %v, want ENOTFOUND", err)
		}

		dup := &identity.User{OrgID: orgA.ID, Email: "admin@example.com", Status: identity.UserActive}
		if err := users.Create(ctx, dup, ""); models.ErrorCode(err) != models.ECONFLICT {
			t.Errorf("Create with a taken email = %v, want ECONFLICT", err)
		}
		same := &identity.User{OrgID: orgB.ID, Email: "admin@example.com", Status: identity.UserActive}
		if err := users.Create(ctx, same, ""); err != nil {
			t.Errorf("the same email in another organization: %v", err)
		}
		if same.Role != identity.RoleUser || same.PasswordHash != "" {
			t.Errorf("default role %q, hash %q; want user and none", same.Role, same.PasswordHash)
		}

		for _, bad := range []struct {
			user     identity.User
			password string
			field    string
		}{
			{identity.User{OrgID: orgA.ID, Email: "not-an-email", Status: 1}, "", "email"},
			{identity.User{OrgID: orgA.ID, Email: "Name <x@example.com>", Status: 1}, "", "email"},
			{identity.User{OrgID: orgA.ID, Email: "x@example.com", Status: 1, Role: "root"}, "", "role"},
			{identity.User{OrgID: orgA.ID, Email: "x@example.com", Status: 2}, "", "status"},
			{identity.User{OrgID: orgA.ID, Email: "x@example.com", Status: 1}, "short", "password"},
		} {
			u := bad.user
			var me *models.Error
			if err := users.Create(ctx, &u, bad.password); !errors.As(err, &me) || me.Code != models.EINVALID || me.Field != bad.field {
				t.Errorf("Create(%+v) = %v, want EINVALID on %s", bad.user, err, bad.field)
			}
		}
	})
}
