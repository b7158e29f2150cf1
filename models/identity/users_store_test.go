package identity_test

import (
	"errors"
	"net/url"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/listing"
	"iam/models/modeltest"
	"iam/models/secret"
	modelstore "iam/models/store"
)

func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	var me *models.Error
	if !errors.As(err, &me) || me.Code != models.EINVALID || me.Field != field {
		t.Errorf("err = %v, want EINVALID on %s", err, field)
	}
}

func TestUserStore_CreateRules(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := modelstore.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		users := modelstore.NewStore(db).Users
		boss := modeltest.AddUser(t, users, org.ID, identity.User{Email: "boss@example.com", FirstName: "Ada", LastName: "Boss", EmployeeID: "E1", Country: "de", Language: "EN_us", Gender: "F"})
		if boss.DisplayName != "Ada Boss" || boss.Country != "DE" || boss.Language != "en-US" {
			t.Errorf("normalized = %q %q %q", boss.DisplayName, boss.Country, boss.Language)
		}
		stranger := modeltest.AddUser(t, users, other.ID, identity.User{Email: "x@example.com"})

		for _, c := range []struct {
			name  string
			user  identity.User
			field string
		}{
			{"gender", identity.User{Email: "a@example.com", Gender: "X"}, "gender"},
			{"country", identity.User{Email: "a@example.com", Country: "XX"}, "country"},
			{"language", identity.User{Email: "a@example.com", Language: "english"}, "language"},
			{"language country", identity.User{Email: "a@example.com", Language: "en-ZZ"}, "language"},
			{"status", identity.User{Email: "a@example.com", Status: 3}, "status"},
			{"email", identity.User{Email: "a@"}, "email"},
			{"length", identity.User{Email: "a@example.com", City: string(make([]byte, 300))}, "city"},
			{"manager elsewhere", identity.User{Email: "a@example.com", ManagerID: &stranger.ID}, "manager"},
		} {
			t.Run(c.name, func(t *testing.T) {
				u := c.user
				u.OrgID = org.ID
				if u.Status == 0 {
					u.Status = identity.UserActive
				}
				wantInvalid(t, users.Create(ctx, &u, ""), c.field)
			})
		}
		dup := identity.User{OrgID: org.ID, Email: "other@example.com", EmployeeID: "E1", Status: 1}
		var me *models.Error
		if err := users.Create(ctx, &dup, ""); !errors.As(err, &me) || me.Code != models.ECONFLICT || me.Field != "employeeID" {
			t.Errorf("duplicate employee id = %v, want ECONFLICT on employeeID", err)
		}
		if n, _ := users.CountUsers(ctx, org.ID); n != 1 {
			t.Errorf("%d users after refused creates, want 1 (nothing half-written)", n)
		}
	})
}

func TestUserStore_UpdateManager(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		org := modeltest.NewOrg(t, modelstore.NewStore(db))
		users := modelstore.NewStore(db).Users
		a := modeltest.AddUser(t, users, org.ID, identity.User{Email: "a@example.com"})
		b := modeltest.AddUser(t, users, org.ID, identity.User{Email: "b@example.com", ManagerID: &a.ID})
		c := modeltest.AddUser(t, users, org.ID, identity.User{Email: "c@example.com", ManagerID: &b.ID})

		setManager := func(id int64) identity.UserChange {
			return func(u *identity.User) error { u.ManagerID = &id; return nil }
		}
		_, err := users.Update(ctx, org.ID, a.ID, setManager(c.ID), nil)
		wantInvalid(t, err, "manager")
		_, err = users.Update(ctx, org.ID, a.ID, setManager(a.ID), nil)
		wantInvalid(t, err, "manager")
		_, err = users.Update(ctx, org.ID, a.ID, setManager(123), nil)
		wantInvalid(t, err, "manager")
		// Moving c under a is no cycle.
		if _, err = users.Update(ctx, org.ID, c.ID, setManager(a.ID), nil); err != nil {
			t.Fatalf("valid manager change: %v", err)
		}
		pw := "a new long password"
		got, err := users.Update(ctx, org.ID, c.ID, func(u *identity.User) error { u.Title = "Chief"; return nil }, &pw)
		if err != nil || got.Title != "Chief" || !secret.VerifyPassword(got.PasswordHash, pw) {
			t.Errorf("update title and password = %+v, %v", got, err)
		}
		if _, err = users.Update(ctx, modeltest.NewOrg(t, modelstore.NewStore(db)).ID, c.ID, setManager(a.ID), nil); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("update from another organization = %v, want ENOTFOUND", err)
		}

		// Deleting a leaves b and c without a manager.
		deleted, err := users.DeleteMany(ctx, org.ID, []int64{a.ID, 999})
		if err != nil || len(deleted) != 1 || deleted[0] != a.ID {
			t.Fatalf("DeleteMany = %v, %v", deleted, err)
		}
		for _, id := range []int64{b.ID, c.ID} {
			u, err := users.Get(ctx, org.ID, id)
			if err != nil || u.ManagerID != nil {
				t.Errorf("report %d after its manager was deleted: %+v, %v", id, u, err)
			}
		}
		if err := users.Delete(ctx, org.ID, a.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("second delete = %v, want ENOTFOUND", err)
		}
	})
}

func TestUserStore_List(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := modelstore.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		users := modelstore.NewStore(db).Users
		modeltest.AddUser(t, users, org.ID, identity.User{Email: "a@example.com", Department: "Sales", IsLicensed: true})
		modeltest.AddUser(t, users, org.ID, identity.User{Email: "b@example.com", Department: "Sales"})
		modeltest.AddUser(t, users, org.ID, identity.User{Email: "c@example.com", Department: "IT", IsLicensed: true})
		modeltest.AddUser(t, users, other.ID, identity.User{Email: "a@example.com", Department: "Sales", IsLicensed: true})

		for _, c := range []struct {
			licensing identity.Licensing
			filter    string
			want      int
		}{
			{"", "", 3}, {identity.Licensed, "", 2}, {identity.Unlicensed, "", 1},
			{identity.LicensingBoth, `department eq "Sales"`, 2}, {identity.Licensed, `department eq "Sales"`, 1},
		} {
			p, err := listing.Parse(url.Values{"filter": {c.filter}}, identity.UserListing)
			if err != nil {
				t.Fatal(err)
			}
			got, meta, err := users.List(ctx, org.ID, c.licensing, p)
			if err != nil || len(got) != c.want || meta.(*listing.CursorMeta).Total != int64(c.want) {
				t.Errorf("List(%q, %q) = %d users, %+v, %v; want %d", c.licensing, c.filter, len(got), meta, err, c.want)
			}
		}
		if _, _, err := users.List(ctx, org.ID, "some", listing.Params{}); err == nil {
			t.Error("a bad licensing value was accepted")
		}

		// The unfiltered totals come from the kept count: it follows
		// licensing changes and deletes.
		page, _, _ := users.List(ctx, org.ID, identity.Licensed, listing.Params{})
		if _, err := users.Update(ctx, org.ID, page[0].ID, func(u *identity.User) error { u.IsLicensed = false; return nil }, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := users.DeleteMany(ctx, org.ID, []int64{page[1].ID}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			licensing identity.Licensing
			want      int64
		}{{identity.LicensingBoth, 2}, {identity.Licensed, 0}, {identity.Unlicensed, 2}} {
			_, meta, err := users.List(ctx, org.ID, c.licensing, listing.Params{})
			if err != nil || meta.(*listing.CursorMeta).Total != c.want {
				t.Errorf("after changes, %q total = %+v, %v; want %d", c.licensing, meta, err, c.want)
			}
		}
	})
}
