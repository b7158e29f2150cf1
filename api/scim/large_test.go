package scim_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/sqldb"
)

// TestSCIM_PatchTenThousandMembers adds 10,000 members in one PATCH and
// removes them in another, set-based (skipped under -short).
func TestSCIM_PatchTenThousandMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 users: not under -short")
	}
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env, c := newEnv(t, db)
		const n = 10_000
		now := time.Now().UTC()
		ids := make([]any, 0, n)
		for start := 0; start < n; start += 1000 {
			users := make([]identity.User, 0, 1000)
			for i := start; i < start+1000; i++ {
				email := fmt.Sprintf("m%d@example.com", i)
				users = append(users, identity.User{ID: sqldb.NewID(), OrgID: env.Org.ID, FirstName: "M", Email: email, UserName: email,
					Status: identity.UserActive, Role: identity.RoleUser, IsLicensed: true, CreatedAt: now, UpdatedAt: now})
			}
			if _, err := db.NewInsert().Model(&users).Exec(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, u := range users {
				ids = append(ids, obj{"value": models.FormatID(u.ID)})
			}
		}
		gid := c.do("POST", "/Groups", obj{"displayName": "All"}).want(t, 201).id()
		start := time.Now()
		c.do("PATCH", "/Groups/"+gid+"?excludedAttributes=members", patch(obj{"op": "add", "path": "members", "value": ids})).want(t, 200)
		t.Logf("10,000-member add: %s", time.Since(start))
		g := c.do("GET", "/Groups?filter="+q(`displayName eq "All"`)+"&excludedAttributes=members", nil).want(t, 200)
		if _, has := g.resources()[0]["members"]; has {
			t.Fatal("members listed despite excludedAttributes")
		}
		gr, err := env.Store.Groups.Get(context.Background(), env.Org.ID, mustID(t, gid))
		if err != nil || gr.MembersCount != n {
			t.Fatalf("members_count %+v %v", gr, err)
		}
		start = time.Now()
		c.do("PATCH", "/Groups/"+gid, patch(obj{"op": "remove", "path": "members", "value": ids})).want(t, 200)
		t.Logf("10,000-member remove: %s", time.Since(start))
		if gr, _ = env.Store.Groups.Get(context.Background(), env.Org.ID, mustID(t, gid)); gr.MembersCount != 0 {
			t.Fatalf("members_count after remove %d", gr.MembersCount)
		}
	})
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := models.ParseID("id", s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// memberReads counts the statements that read group_members.
type memberReads struct{ n atomic.Int64 }

func (r *memberReads) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (r *memberReads) AfterQuery(_ context.Context, ev *bun.QueryEvent) {
	if strings.Contains(ev.Query, "group_members") {
		r.n.Add(1)
	}
}

// TestSCIM_ExcludedMembersReadsNoMembers: a group list or a group read
// with excludedAttributes=members (or attributes without members) runs no
// statement on group_members, however many members the groups have; with
// members asked for, it does (which shows the count sees them).
func TestSCIM_ExcludedMembersReadsNoMembers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		reads := &memberReads{}
		_, c := newEnv(t, db.WithQueryHook(reads))
		user := c.do("POST", "/Users", obj{"userName": "ann@example.com"}).want(t, 201).id()
		var gid string
		for i := range 3 {
			gid = c.do("POST", "/Groups", obj{"displayName": fmt.Sprintf("G%d", i), "members": []obj{{"value": user}}}).want(t, 201).id()
		}
		for _, path := range []string{
			"/Groups?excludedAttributes=members",
			"/Groups?attributes=displayName",
			"/Groups?filter=" + q(`displayName sw "G"`) + "&excludedAttributes=members&count=2",
			"/Groups/" + gid + "?excludedAttributes=members",
		} {
			reads.n.Store(0)
			r := c.do("GET", path, nil).want(t, 200)
			if n := reads.n.Load(); n != 0 {
				t.Errorf("GET %s: %d statements on group_members", path, n)
			}
			if strings.Contains(string(r.raw), `"members"`) {
				t.Errorf("GET %s: members answered: %s", path, r.raw)
			}
		}
		reads.n.Store(0)
		c.do("GET", "/Groups", nil).want(t, 200)
		if reads.n.Load() == 0 {
			t.Error("GET /Groups read no members: the count does not see the statements")
		}
	})
}
