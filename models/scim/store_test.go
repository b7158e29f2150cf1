package scim_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/modeltest"
	"iam/models/scim"
	"iam/models/store"
)

func filterOf(t *testing.T, s string) scim.Expr {
	t.Helper()
	e, err := scim.ParseFilter(s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return e
}

func TestStore_ListUsers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		st := store.NewStore(db)
		org := modeltest.NewOrg(t, st)
		other := modeltest.NewOrg(t, st)
		ann := modeltest.AddUser(t, st.Users, org.ID, identity.User{FirstName: "Ann", LastName: "Lee", Email: "ann@example.com",
			UserName: "Ann.Lee", ExternalID: "ext-1", Department: "Sales", MobileNumber: "+1 555 0100"})
		bob := modeltest.AddUser(t, st.Users, org.ID, identity.User{FirstName: "Bob", Email: "bob@example.org", Status: identity.UserActive, ManagerID: &ann.ID})
		modeltest.AddUser(t, st.Users, other.ID, identity.User{FirstName: "Ann", Email: "ann@example.com", UserName: "Ann.Lee", ExternalID: "ext-1"})
		if bob.UserName != "bob@example.org" {
			t.Fatalf("userName defaults to the email: %q", bob.UserName)
		}
		cases := map[string][]int64{
			`userName eq "ann.lee"`:                             {ann.ID},
			`externalId eq "ext-1"`:                             {ann.ID},
			`externalId eq "EXT-1"`:                             {},
			`emails[type eq "work" and value co "example.org"]`: {bob.ID},
			`emails.value ew ".COM"`:                            {ann.ID},
			`phoneNumbers[type eq "mobile" and value pr]`:       {ann.ID},
			`not (name.givenName sw "a") and active eq true`:    {bob.ID},
			`urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department eq "sales"`:                              {ann.ID},
			`urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager.value eq "` + models.FormatID(ann.ID) + `"`: {bob.ID},
			`meta.lastModified gt "2000-01-01T00:00:00Z" and meta.created lt "2999-01-01T00:00:00Z"`:                        {ann.ID, bob.ID},
			`userName eq "x' or 1=1 --"`: {},
		}
		for f, want := range cases {
			users, _, total, err := st.SCIM.ListUsers(context.Background(), org.ID, scim.Query{Filter: filterOf(t, f), Count: 10}, false)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if total != len(want) || len(users) != len(want) {
				t.Errorf("%s: total %d, %d users, want %v", f, total, len(users), want)
				continue
			}
			for i := range want {
				if users[i].ID != want[i] {
					t.Errorf("%s: users[%d] = %d, want %d", f, i, users[i].ID, want[i])
				}
			}
		}
		// Paging: 1-based, count 0 answers the total only, sortBy descending.
		users, _, total, err := st.SCIM.ListUsers(context.Background(), org.ID, scim.Query{StartIndex: 2, Count: 1, SortBy: "userName"}, false)
		if err != nil || total != 2 || len(users) != 1 || users[0].ID != bob.ID {
			t.Fatalf("page 2: %v %d %v", users, total, err)
		}
		users, _, total, err = st.SCIM.ListUsers(context.Background(), org.ID, scim.Query{Count: 0}, false)
		if err != nil || total != 2 || len(users) != 0 {
			t.Fatalf("count 0: %v %d %v", users, total, err)
		}
		users, _, _, err = st.SCIM.ListUsers(context.Background(), org.ID, scim.Query{Count: 5, SortBy: "name.givenName", Descending: true}, false)
		if err != nil || len(users) != 2 || users[0].ID != bob.ID {
			t.Fatalf("sort: %v %v", users, err)
		}
		if _, _, _, err = st.SCIM.ListUsers(context.Background(), org.ID, scim.Query{Count: 5, SortBy: "emails.type"}, false); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("sortBy a constant: %v", err)
		}
		// A taken userName (ignoring case) is a conflict naming userName.
		dup := &identity.User{OrgID: org.ID, FirstName: "X", Email: "x@example.com", UserName: "ANN.LEE", Status: 1}
		err = st.Users.Create(context.Background(), dup, "")
		if models.ErrorCode(err) != models.ECONFLICT || !strings.Contains(err.Error(), "userName") {
			t.Fatalf("duplicate userName: %v", err)
		}
	})
}

// TestStore_ListUsersWithGroups: the groups a list reads are each user's
// groups in id order, as UserGroups reads them, for the plain page (read
// by the range of its ids, which holds another organization's member), a
// sorted one, one skipping rows and a filtered one, and the page's users
// are those of the list without groups, in order.
func TestStore_ListUsersWithGroups(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		st := store.NewStore(db)
		ctx := modeltest.AdminOrigin(context.Background())
		org := modeltest.NewOrg(t, st)
		other := modeltest.NewOrg(t, st)
		var ids []int64
		var outsider *identity.User
		for i := range 7 {
			u := modeltest.AddUser(t, st.Users, org.ID, identity.User{FirstName: string(rune('G' - i)), Email: "g" + models.FormatID(int64(i)) + "@example.com"})
			ids = append(ids, u.ID)
			if i == 3 { // inside the id range of a page of the organization's users
				outsider = modeltest.AddUser(t, st.Users, other.ID, identity.User{FirstName: "O", Email: "o@example.com"})
			}
		}
		// Created in reverse so that creation order is not id order.
		for _, g := range []struct {
			name    string
			members []int64
		}{{`"Ops" <é>`, ids[:3]}, {"Sales", []int64{ids[0], ids[4]}}, {"All", ids}} {
			if err := st.Groups.CreateStatic(ctx, &identity.Group{OrgID: org.ID, Name: g.name}, g.members); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Groups.CreateStatic(ctx, &identity.Group{OrgID: other.ID, Name: "Theirs"}, []int64{outsider.ID}); err != nil {
			t.Fatal(err)
		}
		want, err := st.SCIM.UserGroups(ctx, org.ID, ids)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []scim.Query{
			{Count: 100},
			{Count: 3, StartIndex: 3, SortBy: "name.givenName"},
			{Count: 2, StartIndex: 2, Descending: true},
			{Count: 10, Filter: filterOf(t, `name.givenName ge "D"`), SortBy: "userName", Descending: true},
		} {
			plain, _, total, err := st.SCIM.ListUsers(ctx, org.ID, q, false)
			if err != nil {
				t.Fatal(err)
			}
			users, groups, total2, err := st.SCIM.ListUsers(ctx, org.ID, q, true)
			if err != nil {
				t.Fatal(err)
			}
			if total2 != total || len(users) != len(plain) || len(users) == 0 {
				t.Fatalf("%+v: %d users of %d with groups, %d of %d without", q, len(users), total2, len(plain), total)
			}
			for i := range users {
				if users[i].ID != plain[i].ID || users[i].FirstName != plain[i].FirstName {
					t.Errorf("%+v: users[%d] = %d, want %d", q, i, users[i].ID, plain[i].ID)
				}
				id := users[i].ID
				if !slices.Equal(groups[id], want[id]) {
					t.Errorf("%+v: groups of %d = %+v, want %+v", q, id, groups[id], want[id])
				}
			}
			if _, ok := groups[outsider.ID]; ok || len(groups) > len(users) {
				t.Errorf("%+v: groups of %d users for a page of %d", q, len(groups), len(users))
			}
		}
	})
}

func TestGroupStore_EditManyMembers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		st := store.NewStore(db)
		org := modeltest.NewOrg(t, st)
		var ids []int64
		for i := range 2500 {
			u := modeltest.AddUser(t, st.Users, org.ID, identity.User{FirstName: "U", Email: "u" + models.FormatID(int64(i)) + "@example.com"})
			ids = append(ids, u.ID)
			if testing.Short() && i == 1200 {
				break
			}
		}
		ctx := modeltest.AdminOrigin(context.Background())
		// More than 1,000 members at creation: one transaction.
		whole := &identity.Group{OrgID: org.ID, Name: "Whole"}
		if err := st.Groups.CreateStatic(ctx, whole, ids); err != nil || whole.MembersCount != int64(len(ids)) {
			t.Fatalf("create with %d members: %+v %v", len(ids), whole, err)
		}
		broken := &identity.Group{OrgID: org.ID, Name: "Broken"}
		if err := st.Groups.CreateStatic(ctx, broken, append(ids, 12345)); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("create with an unknown member: %v", err)
		}
		if gs, n, err := st.SCIM.ListGroups(context.Background(), org.ID, scim.Query{Count: 5, Filter: filterOf(t, `displayName eq "Broken"`)}); err != nil || n != 0 {
			t.Fatalf("a refused create left %v %d %v", gs, n, err)
		}
		g := &identity.Group{OrgID: org.ID, Name: "Big", ExternalID: "g-ext"}
		if err := st.Groups.Create(ctx, g, nil, nil); err != nil {
			t.Fatal(err)
		}
		name := "Bigger"
		got, err := st.Groups.Edit(ctx, org.ID, g.ID, identity.GroupEdit{Name: &name, Add: append(ids, ids[0])})
		if err != nil {
			t.Fatal(err)
		}
		if got.MembersCount != int64(len(ids)) || got.Name != "Bigger" || got.ExternalID != "g-ext" {
			t.Fatalf("after add: %+v", got)
		}
		got, err = st.Groups.Edit(ctx, org.ID, g.ID, identity.GroupEdit{Remove: ids[:10]})
		if err != nil || got.MembersCount != int64(len(ids)-10) {
			t.Fatalf("after remove: %+v %v", got, err)
		}
		keep := ids[5:8]
		got, err = st.Groups.Edit(ctx, org.ID, g.ID, identity.GroupEdit{ReplaceMembers: &keep})
		if err != nil || got.MembersCount != 3 {
			t.Fatalf("after replace: %+v %v", got, err)
		}
		members, err := st.SCIM.Members(context.Background(), org.ID, []int64{g.ID})
		if err != nil || len(members[g.ID]) != 3 {
			t.Fatalf("members %v %v", members, err)
		}
		gs, total, err := st.SCIM.ListGroups(context.Background(), org.ID, scim.Query{Count: 5,
			Filter: filterOf(t, `members[value eq "`+models.FormatID(ids[6])+`"] and externalId eq "g-ext"`)})
		if err != nil || total != 1 || gs[0].ID != g.ID {
			t.Fatalf("groups %v %d %v", gs, total, err)
		}
		if _, err := st.Groups.Edit(ctx, org.ID, g.ID, identity.GroupEdit{Add: []int64{12345}}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("unknown member: %v", err)
		}
		modeltest.WantEvents(t, db, org.ID, audit.GroupUpdated, 1)
		if n := len(modeltest.EventsOfType(t, db, org.ID, audit.GroupMembersAdded)); n < 2 {
			t.Fatalf("%d members_added events", n)
		}
	})
}

func TestTokenStore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		st := store.NewStore(db)
		org := modeltest.NewOrg(t, st)
		other := modeltest.NewOrg(t, st)
		ctx := modeltest.AdminOrigin(context.Background())
		tok, secret, err := st.ProvisioningTokens.Create(ctx, org.ID, "Okta", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tok.TokenHash == secret || len(secret) < 40 {
			t.Fatal("the token is stored hashed")
		}
		got, err := st.ProvisioningTokens.Authenticate(context.Background(), secret)
		if err != nil || got.ID != tok.ID || got.OrgID != org.ID || got.LastUsedAt == nil {
			t.Fatalf("authenticate: %+v %v", got, err)
		}
		if _, err = st.ProvisioningTokens.Authenticate(context.Background(), secret+"x"); err == nil {
			t.Fatal("a wrong token passed")
		}
		if err = st.ProvisioningTokens.Revoke(ctx, other.ID, tok.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("another org revokes: %v", err)
		}
		if err = st.ProvisioningTokens.Revoke(ctx, org.ID, tok.ID); err != nil {
			t.Fatal(err)
		}
		if _, err = st.ProvisioningTokens.Authenticate(context.Background(), secret); err == nil {
			t.Fatal("a revoked token passed")
		}
		past := time.Now().Add(-time.Hour)
		if _, _, err = st.ProvisioningTokens.Create(ctx, org.ID, "x", &past); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("past expiry: %v", err)
		}
		list, err := st.ProvisioningTokens.List(context.Background(), org.ID)
		if err != nil || len(list) != 1 || list[0].RevokedAt == nil {
			t.Fatalf("list %+v %v", list, err)
		}
		modeltest.OneEvent(t, db, org.ID, audit.ProvisioningTokenCreated)
		modeltest.OneEvent(t, db, org.ID, audit.ProvisioningTokenRevoked)
	})
}

// TestStore_PagingResumes: a client paging through in turn (startIndex 1,
// 3, 5, …) gets every user once, in id order, whether the page seeks past
// the previous page's last id (this store answered it) or skips rows (a
// fresh store, as another process would).
func TestStore_PagingResumes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		st := store.NewStore(db)
		org := modeltest.NewOrg(t, st)
		var want []int64
		for i := range 5 {
			want = append(want, modeltest.AddUser(t, st.Users, org.ID, identity.User{FirstName: "P", Email: "p" + models.FormatID(int64(i)) + "@example.com"}).ID)
		}
		for _, desc := range []bool{false, true} {
			var got []int64
			for start := 1; ; start += 2 {
				users, _, total, err := st.SCIM.ListUsers(context.Background(), org.ID, scim.Query{StartIndex: start, Count: 2, Descending: desc}, false)
				if err != nil || total != 5 {
					t.Fatalf("page %d: %d %v", start, total, err)
				}
				if len(users) == 0 {
					break
				}
				for _, u := range users {
					got = append(got, u.ID)
				}
				// Another process answers the same page by skipping rows.
				other, _, _, err := store.NewStore(db).SCIM.ListUsers(context.Background(), org.ID, scim.Query{StartIndex: start, Count: 2, Descending: desc}, false)
				if err != nil || len(other) != len(users) || other[0].ID != users[0].ID {
					t.Fatalf("page %d of another store: %v %v", start, other, err)
				}
			}
			w := slices.Clone(want)
			if desc {
				slices.Reverse(w)
			}
			if !slices.Equal(got, w) {
				t.Fatalf("descending %v: paged %v, want %v", desc, got, w)
			}
		}
	})
}
