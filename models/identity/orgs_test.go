package identity_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/protection"
	"iam/models/store"
)

// TestStore_CreateOrganization: an organization is made with its first
// admin (active, administrator, the password given or a generated one
// returned), in one transaction: a refused admin leaves no organization
// behind. List shows the organizations oldest first.
func TestStore_CreateOrganization(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := store.NewStore(db)
		policy, now := protection.DefaultAdminSettings().AccountBlocking, time.Now()

		a := &identity.Organization{Name: "A"}
		admin, generated, err := store.Orgs.CreateOrganization(ctx, a, identity.FirstAdmin{Email: "admin@a.example.com"})
		if err != nil {
			t.Fatal(err)
		}
		if admin.OrgID != a.ID || admin.Role != identity.RoleAdmin || admin.Status != identity.UserActive || len(generated) < 16 {
			t.Fatalf("admin %+v, generated %q", admin, generated)
		}
		if _, err = store.Users.Authenticate(ctx, a.ID, "admin@a.example.com", generated, policy, now); err != nil {
			t.Errorf("the generated password does not sign in: %v", err)
		}
		b := &identity.Organization{Name: "B"}
		if _, generated, createErr := store.Orgs.CreateOrganization(ctx, b, identity.FirstAdmin{Email: "root@b.example.com", Password: "chosen password"}); createErr != nil || generated != "" {
			t.Fatalf("with a password: %q, %v", generated, createErr)
		}
		if _, err = store.Users.Authenticate(ctx, b.ID, "root@b.example.com", "chosen password", policy, now); err != nil {
			t.Errorf("the chosen password does not sign in: %v", err)
		}

		for name, c := range map[string]struct {
			org   string
			admin identity.FirstAdmin
			field string
		}{
			"no name":        {" ", identity.FirstAdmin{Email: "x@example.com"}, "name"},
			"NUL in name":    {"a\x00b", identity.FirstAdmin{Email: "x@example.com"}, "name"},
			"long name":      {strings.Repeat("n", identity.MaxOrgNameLen+1), identity.FirstAdmin{Email: "x@example.com"}, "name"},
			"bad email":      {"C", identity.FirstAdmin{Email: "not an email"}, "email"},
			"short password": {"C", identity.FirstAdmin{Email: "x@example.com", Password: "short"}, "password"},
		} {
			_, _, err = store.Orgs.CreateOrganization(ctx, &identity.Organization{Name: c.org}, c.admin)
			var e *models.Error
			if !errors.As(err, &e) || e.Code != models.EINVALID || e.Field != c.field {
				t.Errorf("%s: %v, want EINVALID on %s", name, err, c.field)
			}
		}
		orgs, err := store.Orgs.List(ctx)
		if err != nil || len(orgs) != 2 || orgs[0].ID != a.ID || orgs[1].ID != b.ID {
			t.Errorf("organizations %+v, %v: want A and B alone (nothing of the refused ones)", orgs, err)
		}
	})
}
