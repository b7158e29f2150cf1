package devices_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/identity"
	"iam/models/modeltest"
	"iam/models/sqldb"
)

// change returns the change of field among changes, and whether there is one.
func change(changes []models.FieldChange, field string) (models.FieldChange, bool) {
	for _, c := range changes {
		if c.Field == field {
			return c, true
		}
	}
	return models.FieldChange{}, false
}

func wantChange(t *testing.T, changes []models.FieldChange, field string, old, nw any) {
	t.Helper()
	c, ok := change(changes, field)
	if !ok || c.Old != old || c.New != nw || c.Secret {
		t.Errorf("change of %s: %+v (found %v), want %v -> %v in %+v", field, c, ok, old, nw, changes)
	}
}

// Registration records device.registered: a new device, a duplicate (which
// names the device it may duplicate), a takeover (which says so, with the
// facts that changed and only that the secret did); a refused registration
// records nothing.
func TestDeviceStore_AuditRegister(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		ev := modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceRegistered)
		modeltest.WantTargets(t, ev, audit.Target(devices.DeviceTargetType, d.ID, "PC1"))
		if ev.Outcome.Result != models.ResultSuccess || ev.Outcome.Reason != "" || ev.Actor.Type != models.ActorSystem {
			t.Errorf("registration event %+v", ev)
		}

		// Refused: a wrong key, a cap reached.
		r := devices.Registration{InstallationKey: "wrong", AgentType: devices.AgentDevice, Platform: "windows", Facts: modeltest.Facts("X", "SX")}
		_, _, err := f.Dev.Register(ctx, r)
		modeltest.WantCode(t, err, models.EUNAUTHORIZED)
		_, _, err = f.ReRegister(t, modeltest.Facts("Y", "SY"), 0, "", 1)
		modeltest.WantCode(t, err, models.ECONFLICT)
		if n := len(modeltest.EventsOfType(t, db, f.Org.ID, audit.DeviceRegistered)); n != 1 {
			t.Fatalf("%d registration events after refusals, want 1", n)
		}

		// A duplicate of a live device names it.
		dup, _, err := f.ReRegister(t, modeltest.Facts("PC1-new", "S1"), 0, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		evs := modeltest.EventsOfType(t, db, f.Org.ID, audit.DeviceRegistered)
		if len(evs) != 2 {
			t.Fatalf("%d registration events, want 2", len(evs))
		}
		modeltest.WantTargets(t, evs[1], audit.Target(devices.DeviceTargetType, dup.ID, "PC1-new"), audit.Target(devices.DeviceTargetType, d.ID, "PC1"))
		if !strings.Contains(evs[1].Outcome.Reason, "duplicate") {
			t.Errorf("duplicate's reason %q", evs[1].Outcome.Reason)
		}

		// The agent registering again with its credential takes its device
		// over: the event says so, with the changed facts and the secret.
		fa := modeltest.Facts("PC1-renamed", "S1")
		again, newSec, err := f.ReRegister(t, fa, d.ID, sec, 0)
		if err != nil || again.ID != d.ID {
			t.Fatalf("takeover: %+v, %v", again, err)
		}
		evs = modeltest.EventsOfType(t, db, f.Org.ID, audit.DeviceRegistered)
		if len(evs) != 3 {
			t.Fatalf("%d registration events, want 3", len(evs))
		}
		take := evs[2]
		modeltest.WantTargets(t, take, audit.Target(devices.DeviceTargetType, d.ID, "PC1-renamed"))
		if !strings.Contains(take.Outcome.Reason, "took over") {
			t.Errorf("takeover's reason %q", take.Outcome.Reason)
		}
		changes := take.Targets[0].Changes
		wantChange(t, changes, "name", "PC1", "PC1-renamed")
		wantChange(t, changes, "dns_hostname", "pc1.corp", "pc1-renamed.corp")
		if c, ok := change(changes, "device_secret"); !ok || !c.Secret || c.Old != nil || c.New != nil {
			t.Errorf("secret change %+v (found %v)", c, ok)
		}
		for _, s := range []string{sec, newSec} {
			for _, e := range modeltest.Events(t, db, f.Org.ID) {
				if strings.Contains(e.Targets[0].DisplayName+e.Outcome.Reason, s) {
					t.Errorf("an event holds a device secret: %+v", e)
				}
			}
		}

		// An NPS extension's registration names its installation.
		nps, err := f.Dev.InstallKey(ctx, f.Org.ID, devices.AgentNPS)
		if err != nil {
			t.Fatal(err)
		}
		in, _, err := f.Dev.RegisterInstallation(ctx, devices.Registration{InstallationKey: nps, AgentType: devices.AgentNPS,
			Platform: "windows", Facts: modeltest.Facts("NPS1", "N1")})
		if err != nil {
			t.Fatal(err)
		}
		evs = modeltest.EventsOfType(t, db, f.Org.ID, audit.DeviceRegistered)
		if len(evs) != 4 {
			t.Fatalf("%d registration events, want 4", len(evs))
		}
		modeltest.WantTargets(t, evs[3], audit.Target(devices.InstallationTargetType, in.ID, "NPS1 (NPSExtension)"))
	})
}

// Deleting a device records device.deleted once; a SvcJoined device's row
// removed by its agent's uninstall ack records it again, saying so; an
// unknown device records nothing.
func TestDeviceStore_AuditDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		ad, _ := f.Register(t, modeltest.Facts("AD1", "S1"))
		_, err := f.Dev.Delete(ctx, f.Org.ID, ad.ID+1)
		modeltest.WantCode(t, err, models.ENOTFOUND)
		_, err = f.Dev.Delete(ctx, modeltest.NewOrg(t, f.Store).ID, ad.ID)
		modeltest.WantCode(t, err, models.ENOTFOUND)
		if evs := modeltest.EventsOfType(t, db, f.Org.ID, audit.DeviceDeleted); len(evs) != 0 {
			t.Fatalf("refused deletes recorded %+v", evs)
		}
		for range 2 { // deleted again: nothing changes, nothing is recorded
			if _, err = f.Dev.Delete(ctx, f.Org.ID, ad.ID); err != nil {
				t.Fatal(err)
			}
		}
		ev := modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceDeleted)
		modeltest.WantTargets(t, ev, audit.Target(devices.DeviceTargetType, ad.ID, "AD1"))

		fa := modeltest.Facts("SVC1", "S2")
		fa.JoinType = devices.JoinSvc
		svc, sec := f.Register(t, fa)
		if _, err = f.Dev.Delete(ctx, f.Org.ID, svc.ID); err != nil {
			t.Fatal(err)
		}
		in := devices.CheckIn{Facts: fa}
		cmds, err := f.CheckIn(t, svc.ID, sec, in)
		if err != nil || len(cmds) != 1 {
			t.Fatalf("uninstall: %+v, %v", cmds, err)
		}
		// A failed uninstall ack removes nothing and records nothing.
		in.Acks = []devices.Ack{{CommandID: models.FormatID(cmds[0].ID), Status: devices.CommandFailed}}
		if _, err = f.CheckIn(t, svc.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		if n := len(modeltest.EventsOfType(t, db, f.Org.ID, audit.DeviceDeleted)); n != 2 {
			t.Fatalf("%d delete events after the failed uninstall, want 2", n)
		}
		// Another deleted device's done ack removes its row, and says so.
		fb := modeltest.Facts("SVC2", "S3")
		fb.JoinType = devices.JoinSvc
		svc2, sec2 := f.Register(t, fb)
		if _, err = f.Dev.Delete(ctx, f.Org.ID, svc2.ID); err != nil {
			t.Fatal(err)
		}
		in = devices.CheckIn{Facts: fb}
		cmds, err = f.CheckIn(t, svc2.ID, sec2, in)
		if err != nil || len(cmds) != 1 {
			t.Fatalf("uninstall: %+v, %v", cmds, err)
		}
		in.Acks = []devices.Ack{{CommandID: models.FormatID(cmds[0].ID), Status: devices.CommandDone}}
		if _, err = f.CheckIn(t, svc2.ID, sec2, in); err != nil {
			t.Fatal(err)
		}
		evs := modeltest.EventsOfType(t, db, f.Org.ID, audit.DeviceDeleted)
		if len(evs) != 4 {
			t.Fatalf("%d delete events, want 4: %+v", len(evs), evs)
		}
		modeltest.WantTargets(t, evs[3], audit.Target(devices.DeviceTargetType, svc2.ID, "SVC2"))
		if !strings.Contains(evs[3].Outcome.Reason, "acknowledged its uninstall") {
			t.Errorf("removal's reason %q", evs[3].Outcome.Reason)
		}
	})
}

// The admin's link, cancel-link and unlink and the agent's answers record
// their events, each naming the account (with the link's changes), the
// device and the user; refused changes record nothing.
func TestDeviceStore_AuditLinks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 2)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		in := devices.CheckIn{Facts: d.DeviceFacts, Accounts: accounts("alice", "bob", "carol")}
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		accs, _ := f.Dev.Accounts(ctx, f.Org.ID, d.ID)
		alice, bob, carol := accs[0], accs[1], accs[2]
		u0, u1 := f.Users[0], f.Users[1]
		dev := audit.Target(devices.DeviceTargetType, d.ID, "PC1")
		count := func(typ string) int { return len(modeltest.EventsOfType(t, db, f.Org.ID, typ)) }
		last := func(typ string) models.EventRecord {
			t.Helper()
			evs := modeltest.EventsOfType(t, db, f.Org.ID, typ)
			if len(evs) == 0 {
				t.Fatalf("no %s event", typ)
			}
			return evs[len(evs)-1]
		}

		// Link: requested, with the link's changes.
		if _, err := f.Dev.Link(ctx, f.Org.ID, d.ID, alice.ID, devices.LinkRequest{UserID: u0.ID, PermissionLevel: "Administrator"}); err != nil {
			t.Fatal(err)
		}
		ev := modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceAccountLinkRequest)
		modeltest.WantTargets(t, ev, audit.Target(devices.LocalAccountTargetType, alice.ID, "alice"), dev, audit.Target(identity.UserTargetType, u0.ID, u0.Email))
		ch := ev.Targets[0].Changes
		wantChange(t, ch, "link_status", devices.LinkUnlinked, devices.LinkPending)
		wantChange(t, ch, "idp_user_id", "", models.FormatID(u0.ID))
		wantChange(t, ch, "link_type", "", devices.LinkManual)
		wantChange(t, ch, "permission_level", "", "Administrator")
		// Refused: the account is pending; the user is linked to another
		// account of the device; another organization's device.
		_, err := f.Dev.Link(ctx, f.Org.ID, d.ID, alice.ID, devices.LinkRequest{UserID: u1.ID, PermissionLevel: "Standard"})
		modeltest.WantCode(t, err, models.ECONFLICT)
		_, err = f.Dev.Link(ctx, f.Org.ID, d.ID, bob.ID, devices.LinkRequest{UserID: u0.ID, PermissionLevel: "Standard"})
		modeltest.WantCode(t, err, models.ECONFLICT)
		_, err = f.Dev.Link(ctx, modeltest.NewOrg(t, f.Store).ID, d.ID, bob.ID, devices.LinkRequest{UserID: u1.ID, PermissionLevel: "Standard"})
		modeltest.WantCode(t, err, models.ENOTFOUND)
		_, err = f.Dev.Unlink(ctx, f.Org.ID, d.ID, alice.ID, "admin", "")
		modeltest.WantCode(t, err, models.ECONFLICT)
		if n := count(audit.DeviceAccountLinkRequest); n != 1 || count(audit.DeviceAccountUnlinked) != 0 {
			t.Fatalf("refused links recorded: %d link requests", n)
		}

		// The agent's done ack: linked.
		cmds, _ := f.CheckIn(t, d.ID, sec, in)
		in.Acks = []devices.Ack{{CommandID: models.FormatID(cmds[0].ID), Status: devices.CommandDone}}
		if _, err = f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		ev = modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceAccountLinked)
		modeltest.WantTargets(t, ev, audit.Target(devices.LocalAccountTargetType, alice.ID, "alice"), dev, audit.Target(identity.UserTargetType, u0.ID, ""))
		wantChange(t, ev.Targets[0].Changes, "link_status", devices.LinkPending, devices.LinkLinked)
		if ev.Outcome.Result != models.ResultSuccess {
			t.Errorf("linked outcome %+v", ev.Outcome)
		}
		// The same ack again changes nothing and records nothing.
		if _, err = f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		in.Acks = nil
		if n := count(audit.DeviceAccountLinked); n != 1 {
			t.Fatalf("%d linked events after a repeated ack", n)
		}

		// Unlink by the admin, with its reason; then the device's answer.
		if _, err = f.Dev.Unlink(ctx, f.Org.ID, d.ID, alice.ID, "admin", "left the team"); err != nil {
			t.Fatal(err)
		}
		ev = modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceAccountUnlinked)
		modeltest.WantTargets(t, ev, audit.Target(devices.LocalAccountTargetType, alice.ID, "alice"), dev, audit.Target(identity.UserTargetType, u0.ID, ""))
		wantChange(t, ev.Targets[0].Changes, "link_status", devices.LinkLinked, devices.LinkUnlinked)
		wantChange(t, ev.Targets[0].Changes, "idp_user_id", models.FormatID(u0.ID), "")
		if ev.Outcome.Reason != "left the team" {
			t.Errorf("unlink's reason %q", ev.Outcome.Reason)
		}
		cmds, _ = f.CheckIn(t, d.ID, sec, in)
		in.Acks = []devices.Ack{{CommandID: models.FormatID(cmds[0].ID), Status: devices.CommandDone}}
		if _, err = f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		in.Acks = nil
		ev = last(audit.DeviceAccountUnlinked)
		modeltest.WantTargets(t, ev, audit.Target(devices.LocalAccountTargetType, alice.ID, "alice"), dev)
		if count(audit.DeviceAccountUnlinked) != 2 || ev.Outcome.Result != models.ResultSuccess ||
			!strings.Contains(ev.Outcome.Reason, "applied the unlink") {
			t.Errorf("the device's unlink: %+v", ev)
		}

		// Cancel-link; refused once unlinked.
		if _, err = f.Dev.Link(ctx, f.Org.ID, d.ID, bob.ID, devices.LinkRequest{UserID: u1.ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		if _, err = f.Dev.CancelLink(ctx, f.Org.ID, d.ID, bob.ID, "admin"); err != nil {
			t.Fatal(err)
		}
		_, err = f.Dev.CancelLink(ctx, f.Org.ID, d.ID, bob.ID, "admin")
		modeltest.WantCode(t, err, models.ECONFLICT)
		ev = modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceAccountLinkCanceled)
		modeltest.WantTargets(t, ev, audit.Target(devices.LocalAccountTargetType, bob.ID, "bob"), dev, audit.Target(identity.UserTargetType, u1.ID, ""))
		wantChange(t, ev.Targets[0].Changes, "link_status", devices.LinkPending, devices.LinkUnlinked)

		// A failed link: device.account.linked, a FAILURE with the agent's
		// message.
		if _, err = f.Dev.Link(ctx, f.Org.ID, d.ID, bob.ID, devices.LinkRequest{UserID: u1.ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		cmds, _ = f.CheckIn(t, d.ID, sec, in)
		in.Acks = []devices.Ack{{CommandID: models.FormatID(cmds[0].ID), Status: devices.CommandFailed, Message: "no such account"}}
		if _, err = f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		in.Acks = nil
		ev = last(audit.DeviceAccountLinked)
		modeltest.WantTargets(t, ev, audit.Target(devices.LocalAccountTargetType, bob.ID, "bob"), dev, audit.Target(identity.UserTargetType, u1.ID, ""))
		if ev.Outcome.Result != models.ResultFailure || !strings.Contains(ev.Outcome.Reason, "no such account") {
			t.Errorf("failed link's outcome %+v", ev.Outcome)
		}

		// An account gone from the device takes its link with it.
		if _, err = f.Dev.Link(ctx, f.Org.ID, d.ID, carol.ID, devices.LinkRequest{UserID: u1.ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		canceled := count(audit.DeviceAccountLinkCanceled)
		in.Accounts = accounts("alice", "bob")
		if _, err = f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		if count(audit.DeviceAccountLinkCanceled) != canceled+1 {
			t.Fatal("a vanished pending account's link recorded no cancel")
		}
		ev = last(audit.DeviceAccountLinkCanceled)
		modeltest.WantTargets(t, ev, audit.Target(devices.LocalAccountTargetType, carol.ID, "carol"), dev, audit.Target(identity.UserTargetType, u1.ID, ""))
		if !strings.Contains(ev.Outcome.Reason, "no longer on the device") {
			t.Errorf("vanished account's reason %q", ev.Outcome.Reason)
		}
	})
}

// Removing offline-enrolled users records one event naming the device and
// the users removed (past 999 users, several events, the device first in
// each); removing none records nothing.
func TestDeviceStore_AuditOfflineUsers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 2)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		u0, u1 := f.Users[0], f.Users[1]
		in := devices.CheckIn{Facts: d.DeviceFacts, OfflineUsers: []devices.OfflineUserReport{
			{ID: models.FormatID(u0.ID), DisplayName: "User Zero", UserName: u0.Email},
			{ID: models.FormatID(u1.ID), UserName: u1.Email}}}
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Dev.RemoveOfflineUsers(ctx, f.Org.ID, d.ID, []int64{12345}); err != nil {
			t.Fatal(err)
		}
		_, err := f.Dev.RemoveOfflineUsers(ctx, modeltest.NewOrg(t, f.Store).ID, d.ID, []int64{u0.ID})
		modeltest.WantCode(t, err, models.ENOTFOUND)
		if evs := modeltest.EventsOfType(t, db, f.Org.ID, audit.DeviceOfflineUserRemoved); len(evs) != 0 {
			t.Fatalf("nothing removed, yet %+v", evs)
		}
		removed, err := f.Dev.RemoveOfflineUsers(ctx, f.Org.ID, d.ID, []int64{u1.ID, 12345, u0.ID, u1.ID})
		if err != nil || len(removed) != 2 {
			t.Fatalf("removed %v, %v", removed, err)
		}
		ev := modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceOfflineUserRemoved)
		modeltest.WantTargets(t, ev, audit.Target(devices.DeviceTargetType, d.ID, "PC1"),
			audit.Target(devices.OfflineUserTargetType, u1.ID, u1.Email), audit.Target(devices.OfflineUserTargetType, u0.ID, "User Zero"))

		// 1,000 at once: two events of at most 1,000 targets.
		const n = 1000
		rows := make([]devices.OfflineUser, n)
		ids := make([]int64, n)
		for i := range rows {
			ids[i] = int64(1_000_000 + i)
			rows[i] = devices.OfflineUser{DeviceID: d.ID, UserID: ids[i], OrgID: f.Org.ID, UserName: "u"}
		}
		if _, err = db.NewInsert().Model(&rows).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if removed, err = f.Dev.RemoveOfflineUsers(ctx, f.Org.ID, d.ID, ids); err != nil || len(removed) != n {
			t.Fatalf("removed %d, %v", len(removed), err)
		}
		evs := modeltest.EventsOfType(t, db, f.Org.ID, audit.DeviceOfflineUserRemoved)[1:]
		if len(evs) != 2 || len(evs[0].Targets) != 1000 || len(evs[1].Targets) != 2 {
			t.Fatalf("%d events for 1,000 users (want 2 of 1,000 and 2 targets)", len(evs))
		}
		seen := 0
		for _, e := range evs {
			if e.Targets[0].Type != devices.DeviceTargetType || e.Targets[0].ID != models.FormatID(d.ID) {
				t.Errorf("an event's first target %+v, want the device", e.Targets[0])
			}
			seen += len(e.Targets) - 1
		}
		if seen != n {
			t.Errorf("%d users named, want %d", seen, n)
		}
	})
}

// The linking settings' update records its changes; a refused one records
// nothing.
func TestDeviceStore_AuditLinkingSettings(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		bad := devices.DefaultAccountLinkingSettings()
		bad.AttributeType = "nope"
		modeltest.WantCode(t, f.Dev.PutLinkingSettings(ctx, f.Org.ID, &bad), models.EINVALID)
		if evs := modeltest.EventsOfType(t, db, f.Org.ID, audit.LinkingSettingsUpdated); len(evs) != 0 {
			t.Fatalf("refused update recorded %+v", evs)
		}
		set := devices.DefaultAccountLinkingSettings()
		set.IsEnabled, set.AttributeValue = true, "email"
		if err := f.Dev.PutLinkingSettings(ctx, f.Org.ID, &set); err != nil {
			t.Fatal(err)
		}
		ev := modeltest.OneEvent(t, db, f.Org.ID, audit.LinkingSettingsUpdated)
		modeltest.WantTargets(t, ev, audit.Target(devices.LinkingSettingsTargetType, f.Org.ID, ""))
		ch := ev.Targets[0].Changes
		if len(ch) != 2 {
			t.Errorf("changes %+v, want is_enabled and attribute_value", ch)
		}
		wantChange(t, ch, "is_enabled", false, true)
		wantChange(t, ch, "attribute_value", "email_local_part", "email")
	})
}

// Regenerating an installation key records that the key changed, never
// the key.
func TestDeviceStore_AuditInstallKey(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		_, err := f.Dev.RegenerateInstallKey(ctx, f.Org.ID, "Other")
		modeltest.WantCode(t, err, models.EINVALID)
		if evs := modeltest.EventsOfType(t, db, f.Org.ID, audit.AgentInstallKeyRegenerate); len(evs) != 0 {
			t.Fatalf("refused regeneration recorded %+v", evs)
		}
		key, err := f.Dev.RegenerateInstallKey(ctx, f.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		ev := modeltest.OneEvent(t, db, f.Org.ID, audit.AgentInstallKeyRegenerate)
		if len(ev.Targets) != 1 || ev.Targets[0].Type != devices.InstallKeyTargetType || ev.Targets[0].ID != devices.AgentDevice {
			t.Fatalf("targets %+v", ev.Targets)
		}
		c := ev.Targets[0].Changes
		if len(c) != 1 || !c[0].Secret || c[0].Old != nil || c[0].New != nil {
			t.Errorf("changes %+v, want only that the key changed", c)
		}
		var body string
		if err := db.NewSelect().Table("audit_events").Column("body").Where("org_id = ? AND event_type = ?", f.Org.ID,
			audit.AgentInstallKeyRegenerate).Scan(ctx, &body); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(body, key) || strings.Contains(body, f.Key) {
			t.Errorf("the event holds an installation key: %s", body)
		}
	})
}

// statementCounter counts the statements bun runs while on.
type statementCounter struct{ on, n atomic.Int64 }

func (c *statementCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	return ctx
}

func (c *statementCounter) AfterQuery(_ context.Context, _ *bun.QueryEvent) {
	if c.on.Load() == 1 {
		c.n.Add(1)
	}
}

// An unchanged check-in (the hot path) records no audit event and runs no
// statement of its own: its contact time joins the next batch.
func TestDeviceStore_AuditUnchangedCheckIn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		counter := &statementCounter{}
		db = db.WithQueryHook(counter)
		f := modeltest.NewDeviceFixture(t, db, 0)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		in := devices.CheckIn{Facts: d.DeviceFacts, Accounts: accounts("alice")}
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		if err := f.Dev.FlushContacts(ctx); err != nil {
			t.Fatal(err)
		}
		before := len(modeltest.Events(t, db, f.Org.ID))
		heads, headErr := sqldb.NumberAuditEvents(ctx, db, f.Org.ID)
		if headErr != nil {
			t.Fatal(headErr)
		}
		for range 3 {
			dev, err := f.Dev.AuthenticateCheckIn(ctx, d.ID, sec)
			if err != nil {
				t.Fatal(err)
			}
			same := in
			if err = same.Validate(); err != nil {
				t.Fatal(err)
			}
			counter.on.Store(1)
			_, err = f.Dev.CheckIn(ctx, dev, &same)
			counter.on.Store(0)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
		if n := counter.n.Load(); n != 0 {
			t.Errorf("unchanged check-ins ran %d statements, want none", n)
		}
		if err := f.Dev.FlushContacts(ctx); err != nil {
			t.Fatal(err)
		}
		if after := len(modeltest.Events(t, db, f.Org.ID)); after != before {
			t.Errorf("unchanged check-ins: %d audit events, then %d", before, after)
		}
		headsAfter, headErr := sqldb.NumberAuditEvents(ctx, db, f.Org.ID)
		if headErr != nil {
			t.Fatal(headErr)
		}
		if headsAfter != heads {
			t.Errorf("audit head %d -> %d after unchanged check-ins", heads, headsAfter)
		}
	})
}
