package identity_test

import (
	"slices"
	"testing"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/modeltest"
	"iam/models/sqldb"
	modelstore "iam/models/store"
)

// addMembers writes membership rows directly, as a fixture.
func addMembers(t *testing.T, db *bun.DB, g *identity.Group, userIDs ...int64) {
	t.Helper()
	rows := make([]identity.GroupMember, len(userIDs))
	for i, id := range userIDs {
		rows[i] = identity.GroupMember{GroupID: g.ID, UserID: id, OrgID: g.OrgID}
	}
	if _, err := db.NewInsert().Model(&rows).Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// rawGroup inserts a static group row directly, as a fixture.
func rawGroup(t *testing.T, db *bun.DB, orgID int64, name string) *identity.Group {
	t.Helper()
	g := &identity.Group{ID: sqldb.NewID(), OrgID: orgID, Name: name}
	if _, err := db.NewInsert().Model(g).Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGroupStore_MemberUserIDs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := modelstore.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		users := modelstore.NewStore(db).Users
		var ids []int64
		for _, email := range []string{"a@example.com", "b@example.com", "c@example.com"} {
			u := &identity.User{OrgID: org.ID, Email: email, Status: identity.UserActive}
			if err := users.Create(ctx, u, ""); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, u.ID)
		}
		g1, g2 := rawGroup(t, db, org.ID, "one"), rawGroup(t, db, org.ID, "two")
		foreign := rawGroup(t, db, other.ID, "foreign")
		addMembers(t, db, g1, ids[0], ids[1])
		addMembers(t, db, g2, ids[1], ids[2])

		groups := modelstore.NewStore(db).Groups
		got, err := groups.MemberUserIDs(ctx, org.ID, []int64{g1.ID, g2.ID, foreign.ID, 12345})
		if err != nil || !slices.Equal(got, ids) {
			t.Errorf("MemberUserIDs = %v, %v; want %v", got, err, ids)
		}
		if got, _ := groups.MemberUserIDs(ctx, other.ID, []int64{g1.ID}); len(got) != 0 {
			t.Errorf("another organization sees members %v", got)
		}
		if got, err := groups.MemberUserIDs(ctx, org.ID, nil); err != nil || got == nil || len(got) != 0 {
			t.Errorf("no groups = %v, %v; want an empty list", got, err)
		}
		// members_count follows inserts and cascaded deletes (triggers).
		g, _ := groups.Get(ctx, org.ID, g2.ID)
		if g.MembersCount != 2 {
			t.Errorf("members_count = %d, want 2", g.MembersCount)
		}
		if _, err := db.NewDelete().Model((*identity.User)(nil)).Where("id = ?", ids[1]).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for _, want := range []struct {
			g *identity.Group
			n int64
		}{{g1, 1}, {g2, 1}} {
			g, _ := groups.Get(ctx, org.ID, want.g.ID)
			if g.MembersCount != want.n {
				t.Errorf("%s: members_count after a user delete = %d, want %d", g.Name, g.MembersCount, want.n)
			}
		}
	})
}
