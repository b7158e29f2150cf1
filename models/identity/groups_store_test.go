package identity_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/modeltest"
	modelstore "iam/models/store"
)

func recomputeJob() *jobs.Job {
	return &jobs.Job{Kind: "GroupRecompute", Module: "Identity", ActionName: "Recompute group members"}
}

// members returns a group's member ids and checks members_count against them.
func members(t *testing.T, db *bun.DB, g *identity.Group) []int64 {
	t.Helper()
	groups := modelstore.NewStore(db).Groups
	ids, err := groups.MemberIDs(t.Context(), g.ID, 100000)
	if err != nil {
		t.Fatal(err)
	}
	got, err := groups.Get(t.Context(), g.OrgID, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.MembersCount != int64(len(ids)) {
		t.Errorf("group %s: members_count %d, but %d members", g.Name, got.MembersCount, len(ids))
	}
	return ids
}

// recompute runs every batch of a recompute of g, size users at a time.
func recompute(t *testing.T, db *bun.DB, g *identity.Group, size int) int64 {
	t.Helper()
	groups := modelstore.NewStore(db).Groups
	cur, _ := groups.Get(t.Context(), g.OrgID, g.ID)
	var after, users int64
	for range 1000 {
		res, err := groups.RecomputeBatch(t.Context(), g.OrgID, g.ID, cur.RuleVersion, after, size)
		if err != nil || res.Stopped != "" {
			t.Fatalf("RecomputeBatch = %+v, %v", res, err)
		}
		users += res.Users
		if res.Done {
			return users
		}
		after = res.Next
	}
	t.Fatal("recompute does not end")
	return 0
}

func TestGroupStore_Static(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := modelstore.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		users, groups := modelstore.NewStore(db).Users, modelstore.NewStore(db).Groups
		a := modeltest.AddUser(t, users, org.ID, identity.User{Email: "a@example.com"})
		b := modeltest.AddUser(t, users, org.ID, identity.User{Email: "b@example.com"})
		x := modeltest.AddUser(t, users, other.ID, identity.User{Email: "x@example.com"})

		g := &identity.Group{OrgID: org.ID, Name: "Staff"}
		if err := groups.Create(ctx, g, []int64{a.ID, a.ID}, nil); err != nil {
			t.Fatal(err)
		}
		if got := members(t, db, g); !slices.Equal(got, []int64{a.ID}) {
			t.Errorf("members = %v", got)
		}
		wantInvalid(t, groups.Create(ctx, &identity.Group{OrgID: org.ID, Name: "Bad"}, []int64{a.ID, x.ID}, nil), "members")
		if _, err := groups.Get(ctx, org.ID, 0); err == nil {
			t.Error("found a group with id 0")
		}
		var me *models.Error
		if err := groups.Create(ctx, &identity.Group{OrgID: org.ID, Name: "staff"}, nil, nil); !errors.As(err, &me) || me.Code != models.ECONFLICT {
			t.Errorf("duplicate name = %v, want ECONFLICT", err)
		}
		wantInvalid(t, groups.Create(ctx, &identity.Group{OrgID: org.ID, Name: " "}, nil, nil), "name")
		wantInvalid(t, groups.Create(ctx, &identity.Group{OrgID: org.ID, Name: "R", MembershipRule: `city eq "x"`}, nil, nil), "membership_rule")

		if _, err := groups.AddMembers(ctx, org.ID, g.ID, []int64{b.ID, x.ID}); err == nil {
			t.Error("added a user of another organization")
		}
		if got, err := groups.AddMembers(ctx, org.ID, g.ID, []int64{a.ID, b.ID}); err != nil || got.MembersCount != 2 {
			t.Errorf("AddMembers = %+v, %v", got, err)
		}
		if _, err := groups.AddMembers(ctx, other.ID, g.ID, []int64{x.ID}); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("AddMembers from another organization = %v, want ENOTFOUND", err)
		}
		if got, err := groups.RemoveMembers(ctx, org.ID, g.ID, []int64{a.ID, x.ID}); err != nil || got.MembersCount != 1 {
			t.Errorf("RemoveMembers = %+v, %v", got, err)
		}
		name := "Team"
		if got, err := groups.Update(ctx, org.ID, g.ID, identity.GroupChange{Name: &name}, nil); err != nil || got.Name != "Team" {
			t.Errorf("Update = %+v, %v", got, err)
		}
		rule := `city eq "x"`
		_, err := groups.Update(ctx, org.ID, g.ID, identity.GroupChange{MembershipRule: &rule}, recomputeJob())
		wantInvalid(t, err, "membership_rule")
		deleted, err := groups.DeleteMany(ctx, org.ID, []int64{g.ID, 42})
		if err != nil || !slices.Equal(deleted, []int64{g.ID}) {
			t.Errorf("DeleteMany = %v, %v", deleted, err)
		}
	})
}

func TestGroupStore_Dynamic(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		org := modeltest.NewOrg(t, modelstore.NewStore(db))
		users, groups := modelstore.NewStore(db).Users, modelstore.NewStore(db).Groups
		var sales []int64
		for i := range 25 {
			u := identity.User{Email: string(rune('a'+i)) + "@example.com", Department: "IT", Country: "FR"}
			if i%2 == 0 {
				u.Department, u.Country = "Sales", "DE"
			}
			made := modeltest.AddUser(t, users, org.ID, u)
			if i%2 == 0 {
				sales = append(sales, made.ID)
			}
		}
		g := &identity.Group{OrgID: org.ID, Name: "German sales", IsDynamic: true, MembershipRule: `department eq "Sales" and country eq "DE"`}
		wantInvalid(t, groups.Create(ctx, &identity.Group{OrgID: org.ID, Name: "Bad", IsDynamic: true, MembershipRule: `shoeSize eq 3`}, nil, recomputeJob()), "membership_rule")
		wantInvalid(t, groups.Create(ctx, &identity.Group{OrgID: org.ID, Name: "Bad", IsDynamic: true, MembershipRule: `city eq "x"`}, []int64{sales[0]}, recomputeJob()), "members")
		job := recomputeJob()
		if err := groups.Create(ctx, g, nil, job); err != nil {
			t.Fatal(err)
		}
		if job.ID == 0 || g.MembershipJobID == nil || *g.MembershipJobID != job.ID || g.MembershipRule != `(department eq "Sales" and country eq "DE")` {
			t.Errorf("dynamic group %+v, job %d", g, job.ID)
		}
		if n := recompute(t, db, g, 4); n != 25 {
			t.Errorf("recompute covered %d users, want 25", n)
		}
		if got := members(t, db, g); !slices.Equal(got, sales) {
			t.Errorf("members = %v, want %v", got, sales)
		}
		if _, err := groups.AddMembers(ctx, org.ID, g.ID, []int64{sales[0]}); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("posting members of a dynamic group = %v, want EINVALID", err)
		}

		// User writes keep the membership in their own transaction.
		n := modeltest.AddUser(t, users, org.ID, identity.User{Email: "new@example.com", Department: "Sales", Country: "DE"})
		if got := members(t, db, g); !slices.Contains(got, n.ID) {
			t.Error("a created user who matches is not a member")
		}
		if _, err := users.Update(ctx, org.ID, n.ID, func(u *identity.User) error { u.Country = "AT"; return nil }, nil); err != nil {
			t.Fatal(err)
		}
		if got := members(t, db, g); slices.Contains(got, n.ID) {
			t.Error("a user who no longer matches is still a member")
		}
		if err := users.Delete(ctx, org.ID, sales[0]); err != nil {
			t.Fatal(err)
		}
		if got := members(t, db, g); len(got) != len(sales)-1 {
			t.Errorf("%d members after deleting one, want %d", len(got), len(sales)-1)
		}

		// A rule change recomputes; a batch of the old version stops.
		rule := `country eq "FR"`
		job2 := recomputeJob()
		upd, err := groups.Update(ctx, org.ID, g.ID, identity.GroupChange{MembershipRule: &rule}, job2)
		if err != nil || upd.RuleVersion != 2 || job2.ID == 0 {
			t.Fatalf("Update rule = %+v, %v", upd, err)
		}
		if res, err := groups.RecomputeBatch(ctx, org.ID, g.ID, 1, 0, 10); err != nil || res.Stopped != identity.RecomputeSuperseded {
			t.Errorf("old version batch = %+v, %v", res, err)
		}
		recompute(t, db, upd, 7)
		if got := members(t, db, g); len(got) != 12 {
			t.Errorf("%d members of country FR, want 12", len(got))
		}
		if err := groups.Delete(ctx, org.ID, g.ID); err != nil {
			t.Fatal(err)
		}
		if res, err := groups.RecomputeBatch(ctx, org.ID, g.ID, 2, 0, 10); err != nil || res.Stopped != identity.RecomputeGroupGone {
			t.Errorf("batch of a deleted group = %+v, %v", res, err)
		}
	})
}
