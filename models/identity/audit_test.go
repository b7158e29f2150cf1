package identity_test

import (
	"context"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/modeltest"
	modelstore "iam/models/store"
)

// oneEvent returns the only event of type typ of the organization, failing
// the test when there is not exactly one.
func oneEvent(t *testing.T, db bun.IDB, orgID int64, typ string) models.EventRecord {
	t.Helper()
	evs := modeltest.EventsOfType(t, db, orgID, typ)
	if len(evs) != 1 {
		t.Fatalf("%d %s events, want 1: %+v", len(evs), typ, evs)
	}
	return evs[0]
}

// wantTargets fails the test unless ev names exactly targets (type, id and
// display name), in order.
func wantTargets(t *testing.T, ev models.EventRecord, targets ...models.EventTarget) {
	t.Helper()
	if len(ev.Targets) != len(targets) {
		t.Fatalf("%s: %d targets %+v, want %d", ev.EventType, len(ev.Targets), ev.Targets, len(targets))
	}
	for i, want := range targets {
		got := ev.Targets[i]
		if got.Type != want.Type || got.ID != want.ID || got.DisplayName != want.DisplayName {
			t.Errorf("%s: target %d = %+v, want %+v", ev.EventType, i, got, want)
		}
	}
}

// changesOf returns the changes of an event's first target by field.
func changesOf(ev models.EventRecord) map[string]models.FieldChange {
	out := map[string]models.FieldChange{}
	for _, c := range ev.Targets[0].Changes {
		out[c.Field] = c
	}
	return out
}

// wantNoEvent fails the test when the organization has an event of typ.
func wantNoEvent(t *testing.T, db bun.IDB, orgID int64, typ string) {
	t.Helper()
	if evs := modeltest.EventsOfType(t, db, orgID, typ); len(evs) != 0 {
		t.Errorf("%d %s events, want none: %+v", len(evs), typ, evs)
	}
}

// TestOrgStore_CreateRecordsEvent: an organization is created with its
// org.created event (in its own organization), and with its first admin's
// user.created; a refused organization records nothing.
func TestOrgStore_CreateRecordsEvent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := modelstore.NewStore(db)
		org := &identity.Organization{Name: "Acme"}
		admin, _, err := store.Orgs.CreateOrganization(ctx, org, identity.FirstAdmin{Email: "admin@acme.example.com"})
		if err != nil {
			t.Fatal(err)
		}
		ev := oneEvent(t, db, org.ID, audit.OrgCreated)
		wantTargets(t, ev, audit.Target(identity.OrgTargetType, org.ID, "Acme"))
		if ev.OrgID != models.FormatID(org.ID) || ev.Outcome.Result != models.ResultSuccess || ev.Actor.Type != models.ActorSystem {
			t.Errorf("org.created = %+v", ev)
		}
		wantTargets(t, oneEvent(t, db, org.ID, audit.UserCreated), audit.Target(identity.UserTargetType, admin.ID, "Administrator"))

		plain := &identity.Organization{Name: "Plain"}
		if err = store.Orgs.Create(ctx, plain); err != nil {
			t.Fatal(err)
		}
		wantTargets(t, oneEvent(t, db, plain.ID, audit.OrgCreated), audit.Target(identity.OrgTargetType, plain.ID, "Plain"))

		var before int64
		if before, err = db.NewSelect().Table("audit_events").Count(ctx); err != nil {
			t.Fatal(err)
		}
		if err := store.Orgs.Create(ctx, &identity.Organization{Name: "X", TimeZone: "Mars/Base"}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("bad time zone = %v", err)
		}
		// A refused first admin (a bad email) rolls the organization back
		// with its event.
		if _, _, err := store.Orgs.CreateOrganization(ctx, &identity.Organization{Name: "Y"}, identity.FirstAdmin{Email: "nobody"}); err == nil {
			t.Fatal("an organization with a bad admin email was made")
		}
		if after, _ := db.NewSelect().Table("audit_events").Count(ctx); after != before {
			t.Errorf("%d events after refused organizations, want %d", after, before)
		}
	})
}

// TestUserStore_AuditEvents: creating, updating (the changed fields with
// their old and new values), setting a password (only that it changed)
// and deleting users record their events; refused changes record none.
func TestUserStore_AuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := modelstore.NewStore(db)
		org := modeltest.NewOrg(t, store)
		users := store.Users
		boss := modeltest.AddUser(t, users, org.ID, identity.User{Email: "boss@example.com", DisplayName: "The Boss"})
		u := modeltest.AddUser(t, users, org.ID, identity.User{Email: "ann@example.com", FirstName: "Ann", Title: "Clerk"})
		created := modeltest.EventsOfType(t, db, org.ID, audit.UserCreated)
		if len(created) != 2 {
			t.Fatalf("%d user.created events, want 2", len(created))
		}
		wantTargets(t, created[0], audit.Target("user", boss.ID, "The Boss"))
		wantTargets(t, created[1], audit.Target("user", u.ID, "Ann"))

		// An update records the fields it changed, by their API names.
		_, err := users.Update(ctx, org.ID, u.ID, func(x *identity.User) error {
			x.Title, x.Department, x.ManagerID = "Chief", "Sales", &boss.ID
			return nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ev := oneEvent(t, db, org.ID, audit.UserUpdated)
		wantTargets(t, ev, audit.Target("user", u.ID, "Ann"))
		ch := changesOf(ev)
		if len(ch) != 3 || ch["title"].Old != "Clerk" || ch["title"].New != "Chief" ||
			ch["department"].Old != "" || ch["department"].New != "Sales" ||
			ch["manager"].Old != nil || ch["manager"].New != models.FormatID(boss.ID) {
			t.Errorf("user.updated changes = %+v", ev.Targets[0].Changes)
		}
		wantNoEvent(t, db, org.ID, audit.UserPasswordChanged)

		// A password alone: user.password_changed, never the password or
		// its hash; no user.updated.
		pw := "a brand new password"
		got, err := users.Update(ctx, org.ID, u.ID, func(*identity.User) error { return nil }, &pw)
		if err != nil {
			t.Fatal(err)
		}
		ev = oneEvent(t, db, org.ID, audit.UserPasswordChanged)
		wantTargets(t, ev, audit.Target("user", u.ID, "Ann"))
		if c := ev.Targets[0].Changes; len(c) != 1 || c[0].Field != "password" || !c[0].Secret || c[0].Old != nil || c[0].New != nil {
			t.Errorf("user.password_changed changes = %+v", c)
		}
		if n := len(modeltest.EventsOfType(t, db, org.ID, audit.UserUpdated)); n != 1 {
			t.Errorf("%d user.updated events after a password change, want still 1", n)
		}
		var bodies []string
		if err = db.NewSelect().Table("audit_events").Column("body").Where("org_id = ?", org.ID).Scan(ctx, &bodies); err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			if strings.Contains(b, pw) || strings.Contains(b, got.PasswordHash) {
				t.Errorf("an event holds the password or its hash: %s", b)
			}
		}
		// A password with a role change: both events; the role's change
		// in user.updated.
		_, err = users.Update(ctx, org.ID, u.ID, func(x *identity.User) error { x.Role = identity.RoleAdmin; return nil }, &pw)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(modeltest.EventsOfType(t, db, org.ID, audit.UserPasswordChanged)); n != 2 {
			t.Errorf("%d user.password_changed events, want 2", n)
		}
		updates := modeltest.EventsOfType(t, db, org.ID, audit.UserUpdated)
		if len(updates) != 2 || changesOf(updates[1])["role"].New != "admin" || len(updates[1].Targets[0].Changes) != 1 {
			t.Errorf("user.updated events = %+v", updates)
		}

		// Refused updates record nothing.
		_, err = users.Update(ctx, org.ID, u.ID, func(x *identity.User) error { x.ManagerID = &x.ID; return nil }, nil)
		wantInvalid(t, err, "manager")
		_, err = users.Update(ctx, org.ID, u.ID, func(x *identity.User) error { x.Email = "boss@example.com"; return nil }, nil)
		modeltest.WantCode(t, err, models.ECONFLICT)
		_, err = users.Update(ctx, org.ID, u.ID, func(*identity.User) error { return nil }, new("short"))
		wantInvalid(t, err, "password")
		if n := len(modeltest.EventsOfType(t, db, org.ID, audit.UserUpdated)); n != 2 {
			t.Errorf("%d user.updated events after refused updates, want 2", n)
		}
		if n := len(modeltest.EventsOfType(t, db, org.ID, audit.UserPasswordChanged)); n != 2 {
			t.Errorf("%d user.password_changed events after a refused password, want 2", n)
		}
		if err := users.Create(ctx, &identity.User{OrgID: org.ID, Email: "ann@example.com", Status: 1}, ""); models.ErrorCode(err) != models.ECONFLICT {
			t.Fatalf("duplicate create = %v", err)
		}
		if n := len(modeltest.EventsOfType(t, db, org.ID, audit.UserCreated)); n != 2 {
			t.Errorf("%d user.created events after a refused create, want 2", n)
		}

		// Deletes: one event naming each user deleted; a missing one
		// records nothing.
		if err := users.Delete(ctx, org.ID, u.ID); err != nil {
			t.Fatal(err)
		}
		wantTargets(t, oneEvent(t, db, org.ID, audit.UserDeleted), audit.Target("user", u.ID, "Ann"))
		if err := users.Delete(ctx, org.ID, u.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("second delete = %v", err)
		}
		if deleted, err := users.DeleteMany(ctx, org.ID, []int64{u.ID, 12345}); err != nil || len(deleted) != 0 {
			t.Errorf("DeleteMany of missing users = %v, %v", deleted, err)
		}
		if n := len(modeltest.EventsOfType(t, db, org.ID, audit.UserDeleted)); n != 1 {
			t.Errorf("%d user.deleted events after deletes of missing users, want 1", n)
		}
	})
}

// seedUsers inserts n users of the organization straight into the table
// (a fixture: users made through the store one by one would take long) and
// returns their ids, ascending.
func seedUsers(t *testing.T, db *bun.DB, orgID int64, n int) []int64 {
	t.Helper()
	rows := make([]identity.User, n)
	ids := make([]int64, n)
	for i := range rows {
		ids[i] = int64(1_000_000 + i)
		rows[i] = identity.User{ID: ids[i], OrgID: orgID, Email: "u" + models.FormatID(ids[i]) + "@example.com",
			DisplayName: "U" + models.FormatID(ids[i]), Status: identity.UserActive, Role: identity.RoleUser}
	}
	for start := 0; start < n; start += 500 {
		chunk := rows[start:min(start+500, n)]
		if _, err := db.NewInsert().Model(&chunk).Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// TestUserStore_BulkDeleteEventsSplit: deleting more users than an event
// may name writes several user.deleted events of at most MaxEventTargets
// targets, naming every user once.
func TestUserStore_BulkDeleteEventsSplit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		store := modelstore.NewStore(db)
		org := modeltest.NewOrg(t, store)
		ids := seedUsers(t, db, org.ID, identity.MaxEventTargets+1)
		deleted, err := store.Users.DeleteMany(t.Context(), org.ID, ids)
		if err != nil || len(deleted) != len(ids) {
			t.Fatalf("DeleteMany = %d, %v", len(deleted), err)
		}
		evs := modeltest.EventsOfType(t, db, org.ID, audit.UserDeleted)
		if len(evs) != 2 || len(evs[0].Targets) != identity.MaxEventTargets || len(evs[1].Targets) != 1 {
			t.Fatalf("%d user.deleted events, want 2 of %d and 1 targets", len(evs), identity.MaxEventTargets)
		}
		seen := map[string]bool{}
		for _, ev := range evs {
			for _, tg := range ev.Targets {
				if tg.Type != "user" || seen[tg.ID] || tg.DisplayName != "U"+tg.ID {
					t.Fatalf("target %+v (seen: %v)", tg, seen[tg.ID])
				}
				seen[tg.ID] = true
			}
		}
		if len(seen) != len(ids) {
			t.Errorf("%d users named, want %d", len(seen), len(ids))
		}
	})
}

// TestGroupStore_AuditEvents: creating, updating (with the changes),
// adding and removing members (the group first, then only the users that
// changed) and deleting groups record their events; refused changes,
// rolled back, record none.
func TestGroupStore_AuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := modelstore.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		users, groups := store.Users, store.Groups
		a := modeltest.AddUser(t, users, org.ID, identity.User{Email: "a@example.com", DisplayName: "A"})
		b := modeltest.AddUser(t, users, org.ID, identity.User{Email: "b@example.com"})
		x := modeltest.AddUser(t, users, other.ID, identity.User{Email: "x@example.com"})
		ua, ub := audit.Target("user", a.ID, "A"), audit.Target("user", b.ID, "b@example.com")

		g := &identity.Group{OrgID: org.ID, Name: "Staff", Description: "all"}
		if err := groups.Create(ctx, g, []int64{a.ID}, nil); err != nil {
			t.Fatal(err)
		}
		gt := audit.Target("group", g.ID, "Staff")
		wantTargets(t, oneEvent(t, db, org.ID, audit.GroupCreated), gt)
		wantTargets(t, oneEvent(t, db, org.ID, audit.GroupMembersAdded), gt, ua)

		// A refused create (a member of another organization) rolls back
		// the group and its event.
		wantInvalid(t, groups.Create(ctx, &identity.Group{OrgID: org.ID, Name: "Bad"}, []int64{x.ID}, nil), "members")
		oneEvent(t, db, org.ID, audit.GroupCreated)

		// Members: the new ones only; none new, no event.
		if _, err := groups.AddMembers(ctx, org.ID, g.ID, []int64{a.ID, b.ID}); err != nil {
			t.Fatal(err)
		}
		added := modeltest.EventsOfType(t, db, org.ID, audit.GroupMembersAdded)
		if len(added) != 2 {
			t.Fatalf("%d group.members_added events, want 2", len(added))
		}
		wantTargets(t, added[1], gt, ub)
		if _, err := groups.AddMembers(ctx, org.ID, g.ID, []int64{a.ID}); err != nil {
			t.Fatal(err)
		}
		_, err := groups.AddMembers(ctx, org.ID, g.ID, []int64{b.ID, x.ID})
		wantInvalid(t, err, "members")
		if n := len(modeltest.EventsOfType(t, db, org.ID, audit.GroupMembersAdded)); n != 2 {
			t.Errorf("%d group.members_added events after adds that changed nothing, want 2", n)
		}
		if _, err = groups.RemoveMembers(ctx, org.ID, g.ID, []int64{b.ID, x.ID}); err != nil {
			t.Fatal(err)
		}
		wantTargets(t, oneEvent(t, db, org.ID, audit.GroupMembersRemoved), gt, ub)
		if _, err = groups.RemoveMembers(ctx, org.ID, g.ID, []int64{b.ID}); err != nil {
			t.Fatal(err)
		}
		oneEvent(t, db, org.ID, audit.GroupMembersRemoved)

		// Updates: the changed fields.
		name := "Everyone"
		if _, err = groups.Update(ctx, org.ID, g.ID, identity.GroupChange{Name: &name, Description: new("all")}, nil); err != nil {
			t.Fatal(err)
		}
		ev := oneEvent(t, db, org.ID, audit.GroupUpdated)
		wantTargets(t, ev, audit.Target("group", g.ID, "Everyone"))
		if c := ev.Targets[0].Changes; len(c) != 1 || c[0].Field != "name" || c[0].Old != "Staff" || c[0].New != "Everyone" {
			t.Errorf("group.updated changes = %+v", c)
		}
		if _, err = groups.Update(ctx, org.ID, g.ID, identity.GroupChange{MembershipRule: new(`department eq "x"`)}, nil); err == nil {
			t.Fatal("a rule was set on a static group")
		}
		taken := &identity.Group{OrgID: org.ID, Name: "Taken"}
		if err = groups.Create(ctx, taken, nil, nil); err != nil {
			t.Fatal(err)
		}
		if _, err = groups.Update(ctx, org.ID, g.ID, identity.GroupChange{Name: new("Taken")}, nil); models.ErrorCode(err) != models.ECONFLICT {
			t.Fatalf("rename to a taken name = %v", err)
		}
		oneEvent(t, db, org.ID, audit.GroupUpdated)

		// A dynamic group: its rule's change is in group.updated; its
		// recompute job records job.queued.
		dyn := &identity.Group{OrgID: org.ID, Name: "Sales", IsDynamic: true, MembershipRule: `department eq "Sales"`}
		if err = groups.Create(ctx, dyn, nil, recomputeJob()); err != nil {
			t.Fatal(err)
		}
		if _, err = groups.Update(ctx, org.ID, dyn.ID, identity.GroupChange{MembershipRule: new(`department eq "IT"`)}, recomputeJob()); err != nil {
			t.Fatal(err)
		}
		updates := modeltest.EventsOfType(t, db, org.ID, audit.GroupUpdated)
		if len(updates) != 2 || changesOf(updates[1])["membership_rule"].New != `department eq "IT"` {
			t.Errorf("group.updated events = %+v", updates)
		}
		if n := len(modeltest.EventsOfType(t, db, org.ID, audit.JobQueued)); n != 2 {
			t.Errorf("%d job.queued events for the recompute jobs, want 2", n)
		}

		// Deletes: one event naming every group deleted.
		deleted, err := groups.DeleteMany(ctx, org.ID, []int64{g.ID, taken.ID, 999})
		if err != nil || len(deleted) != 2 {
			t.Fatalf("DeleteMany = %v, %v", deleted, err)
		}
		ev = oneEvent(t, db, org.ID, audit.GroupDeleted)
		if len(ev.Targets) != 2 {
			t.Errorf("group.deleted targets = %+v", ev.Targets)
		}
		if err := groups.Delete(ctx, org.ID, g.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("second delete = %v", err)
		}
		oneEvent(t, db, org.ID, audit.GroupDeleted)
		wantNoEvent(t, db, other.ID, audit.GroupDeleted)
	})
}

// TestGroupStore_MemberEventsSplit: adding the most members a request may
// hold names the group first in each group.members_added event, at most
// MaxEventTargets targets an event; removing them likewise.
func TestGroupStore_MemberEventsSplit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := modelstore.NewStore(db)
		org := modeltest.NewOrg(t, store)
		ids := seedUsers(t, db, org.ID, identity.MaxMembersPerRequest)
		g := &identity.Group{OrgID: org.ID, Name: "Big"}
		if err := store.Groups.Create(ctx, g, nil, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Groups.AddMembers(ctx, org.ID, g.ID, ids); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Groups.RemoveMembers(ctx, org.ID, g.ID, ids); err != nil {
			t.Fatal(err)
		}
		for _, typ := range []string{audit.GroupMembersAdded, audit.GroupMembersRemoved} {
			evs := modeltest.EventsOfType(t, db, org.ID, typ)
			if len(evs) != 2 {
				t.Fatalf("%d %s events, want 2", len(evs), typ)
			}
			users := map[string]bool{}
			for _, ev := range evs {
				if len(ev.Targets) > identity.MaxEventTargets || ev.Targets[0].Type != "group" || ev.Targets[0].ID != models.FormatID(g.ID) {
					t.Fatalf("%s: %d targets, first %+v", typ, len(ev.Targets), ev.Targets[0])
				}
				for _, tg := range ev.Targets[1:] {
					users[tg.ID] = true
				}
			}
			if len(users) != len(ids) {
				t.Errorf("%s names %d users, want %d", typ, len(users), len(ids))
			}
		}
	})
}
