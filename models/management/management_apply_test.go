package management_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/listing"
	"iam/models/management"
	"iam/models/modeltest"
)

func startedExecution(t *testing.T, f *mgmtFixture, n management.NewExecution) (*management.Execution, *management.StartedAttempt) {
	t.Helper()
	n.OrgID = f.org.ID
	exec, job, err := f.store.Management.CreateExecution(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	att, err := f.store.Management.StartJobAttempt(t.Context(), f.org.ID, job.ID)
	if err != nil || att.ExecutionID != exec.ID || att.Attempt != 1 {
		t.Fatalf("StartJobAttempt = %+v, %v", att, err)
	}
	return exec, att
}

func memberCount(t *testing.T, f *mgmtFixture, groupID int64) int {
	t.Helper()
	p, _ := listing.Parse(url.Values{}, identity.UserListing)
	users, _, err := f.store.Users.ListGroupMembers(t.Context(), f.org.ID, groupID, p)
	if err != nil {
		t.Fatal(err)
	}
	return len(users)
}

func TestMgmtStore_ApplyDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newMgmtFixture(t, db)
		m := f.store.Management
		u := f.users
		admin := modeltest.AddUser(t, f.store.Users, f.org.ID, identity.User{Email: "admin@example.com", Role: identity.RoleAdmin})
		g := &identity.Group{OrgID: f.org.ID, Name: "static"}
		if err := f.store.Groups.Create(ctx, g, []int64{u[0].ID, u[1].ID, u[2].ID}, nil); err != nil {
			t.Fatal(err)
		}
		// Targets: u0, a missing id, the caller u4, the only admin, u1, u2.
		exec, _ := startedExecution(t, f, management.NewExecution{Action: management.ActionDeleteUsers, CreatedBy: u[4].ID,
			Selection: management.Selection{UserIDs: []int64{u[0].ID, 424242, u[4].ID, admin.ID, u[1].ID, u[2].ID}}})
		first, err := m.ApplyChunk(ctx, f.org.ID, exec.ID, 1, 0, 4)
		if err != nil {
			t.Fatal(err)
		}
		if first.Done || first.Last != 4 || len(first.Results) != 4 || first.Success != 1 || first.Failed != 3 {
			t.Fatalf("first chunk = %+v", first)
		}
		want := []struct{ status, msg string }{
			{"success", "deleted"}, {"failure", "not found"}, {"failure", "yourself"}, {"failure", "last active administrator"},
		}
		for i, w := range want {
			r := first.Results[i]
			if r.Status != w.status || !strings.Contains(r.Message, w.msg) {
				t.Errorf("result %d = %+v, want %s %q", i, r, w.status, w.msg)
			}
		}
		if first.Results[0].Email != "User0@Example.com" {
			t.Errorf("a deleted user's result keeps its email: %+v", first.Results[0])
		}
		// The same chunk again (a retried activity): same results, nothing
		// applied twice.
		again, err := m.ApplyChunk(ctx, f.org.ID, exec.ID, 1, 0, 4)
		if err != nil || len(again.Results) != 4 || again.Success != 1 || again.Failed != 3 {
			t.Fatalf("replayed chunk = %+v, %v", again, err)
		}
		for i := range want {
			if again.Results[i].Status != first.Results[i].Status || again.Results[i].Message != first.Results[i].Message {
				t.Errorf("replayed result %d = %+v, was %+v", i, again.Results[i], first.Results[i])
			}
		}
		rest, err := m.ApplyChunk(ctx, f.org.ID, exec.ID, 1, first.Last, 4)
		if err != nil || !rest.Done || rest.Last != 6 || rest.Success != 3 || rest.Failed != 3 {
			t.Fatalf("last chunk = %+v, %v", rest, err)
		}
		for _, id := range []int64{u[0].ID, u[1].ID, u[2].ID} {
			if _, err = f.store.Users.Get(ctx, f.org.ID, id); models.ErrorCode(err) != models.ENOTFOUND {
				t.Errorf("user %d still exists: %v", id, err)
			}
		}
		for _, id := range []int64{u[3].ID, u[4].ID, admin.ID} {
			if _, err = f.store.Users.Get(ctx, f.org.ID, id); err != nil {
				t.Errorf("user %d was deleted: %v", id, err)
			}
		}
		if n := memberCount(t, f, g.ID); n != 0 {
			t.Errorf("%d members left in the group, want 0", n)
		}
		if err = m.FinishAttempt(ctx, f.org.ID, exec.ID, 1, management.ExecCompleted); err != nil {
			t.Fatal(err)
		}
		got, _ := m.GetExecution(ctx, f.org.ID, management.ActionDeleteUsers, exec.ID)
		if got.Status != management.ExecCompletedWithErrors || got.SuccessCount != 3 || got.FailedCount != 3 {
			t.Errorf("execution = %+v", got)
		}
		_, err = m.ApplyChunk(ctx, f.org.ID, exec.ID, 1, 0, 4)
		modeltest.WantCode(t, err, models.ECONFLICT)

		// A retry started by the administrator: checked against its own
		// caller, so u4 goes now and the administrator is refused as caller.
		_, job2, err := m.Retry(ctx, f.org.ID, management.ActionDeleteUsers, exec.ID, admin.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err = m.StartJobAttempt(ctx, f.org.ID, job2.ID); err != nil {
			t.Fatal(err)
		}
		retry, err := m.ApplyChunk(ctx, f.org.ID, exec.ID, 2, 0, 10)
		if err != nil || len(retry.Results) != 3 {
			t.Fatalf("retry chunk = %+v, %v", retry, err)
		}
		for i, w := range []struct {
			user        int64
			status, msg string
		}{
			{424242, "failure", "not found"}, {u[4].ID, "success", "deleted"}, {admin.ID, "failure", "yourself"},
		} {
			r := retry.Results[i]
			if r.UserID != w.user || r.Status != w.status || !strings.Contains(r.Message, w.msg) {
				t.Errorf("retry result %d = %+v, want %s %q", i, r, w.status, w.msg)
			}
		}
	})
}

func TestMgmtStore_ApplyMove(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newMgmtFixture(t, db)
		m := f.store.Management
		u := f.users
		a1 := modeltest.AddUser(t, f.store.Users, f.org.ID, identity.User{Email: "a1@example.com", Role: identity.RoleAdmin})
		a2 := modeltest.AddUser(t, f.store.Users, f.org.ID, identity.User{Email: "a2@example.com", Role: identity.RoleAdmin})
		job := &jobs.Job{Kind: "GroupRecompute", Module: "Identity", ActionName: "Recompute"}
		dyn := &identity.Group{OrgID: f.org.ID, Name: "new place", IsDynamic: true, MembershipRule: `container eq "OU=New,DC=example"`}
		if err := f.store.Groups.Create(ctx, dyn, nil, job); err != nil {
			t.Fatal(err)
		}
		exec, _ := startedExecution(t, f, management.NewExecution{Action: management.ActionMoveUsers, TargetContainer: "OU=New,DC=example",
			Selection: management.Selection{UserIDs: []int64{u[0].ID, a1.ID, u[1].ID, a2.ID}}})
		res, err := m.ApplyChunk(ctx, f.org.ID, exec.ID, 1, 0, 2)
		if err != nil || res.Success != 2 {
			t.Fatalf("first chunk = %+v, %v", res, err)
		}
		// a1 moved (a2 stays put); then a2 is the last one not moved.
		res, err = m.ApplyChunk(ctx, f.org.ID, exec.ID, 1, res.Last, 2)
		if err != nil || !res.Done || res.Success != 3 || res.Failed != 1 || !strings.Contains(res.Results[1].Message, "last active administrator") {
			t.Fatalf("last chunk = %+v, %v", res, err)
		}
		for _, c := range []struct {
			id   int64
			want string
		}{{u[0].ID, "OU=New,DC=example"}, {a1.ID, "OU=New,DC=example"}, {u[1].ID, "OU=New,DC=example"}, {a2.ID, ""}, {u[2].ID, ""}} {
			got, err := f.store.Users.Get(ctx, f.org.ID, c.id)
			if err != nil || got.Container != c.want {
				t.Errorf("user %d container %q, %v; want %q", c.id, got.Container, err, c.want)
			}
		}
		if n := memberCount(t, f, dyn.ID); n != 3 {
			t.Errorf("the dynamic group on container has %d members, want the 3 moved", n)
		}
	})
}
