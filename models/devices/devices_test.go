package devices_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/listing"
	"iam/models/modeltest"
	"iam/models/sqldb"
)

func accounts(names ...string) []devices.AccountReport {
	out := make([]devices.AccountReport, len(names))
	for i, n := range names {
		out[i] = devices.AccountReport{UserName: n, PermissionLevel: "Standard"}
	}
	return out
}

func TestDeviceStore_InstallKeys(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		again, err := f.Dev.InstallKey(ctx, f.Org.ID, devices.AgentDevice)
		if err != nil || again != f.Key || len(f.Key) != 43 {
			t.Fatalf("key %q then %q (%v): want one stable 256-bit key", f.Key, again, err)
		}
		// Sealed at rest: the database does not hold the key.
		var sealed []byte
		if err = db.NewSelect().Table("agent_install_keys").Column("key_sealed").
			Where("org_id = ? AND agent_type = ?", f.Org.ID, devices.AgentDevice).Scan(ctx, &sealed); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(sealed, []byte(f.Key)) {
			t.Fatal("the installation key is stored in the clear")
		}
		reg := devices.Registration{InstallationKey: f.Key, AgentType: devices.AgentDevice, Platform: "windows", Facts: modeltest.Facts("PC1", "S1")}
		if _, _, err = f.Dev.Register(ctx, reg); err != nil {
			t.Fatal(err)
		}
		// A key one character off: its last character (one of 16 a 256-bit
		// key may end with) replaced by another.
		offByOne := f.Key[:42] + "A"
		if offByOne == f.Key {
			offByOne = f.Key[:42] + "Q"
		}
		for _, bad := range []string{"", "x", offByOne, strings.Repeat("k", 1000)} {
			r := reg
			r.InstallationKey = bad
			_, _, err = f.Dev.Register(ctx, r)
			modeltest.WantCode(t, err, models.EUNAUTHORIZED)
		}
		// Another agent type's key does not register devices.
		nps, err := f.Dev.InstallKey(ctx, f.Org.ID, devices.AgentNPS)
		if err != nil || nps == f.Key {
			t.Fatalf("NPS key %q, %v", nps, err)
		}
		r := reg
		r.InstallationKey = nps
		_, _, err = f.Dev.Register(ctx, r)
		modeltest.WantCode(t, err, models.EUNAUTHORIZED)

		d, sec := f.Register(t, modeltest.Facts("PC2", "S2"))
		fresh, err := f.Dev.RegenerateInstallKey(ctx, f.Org.ID, devices.AgentDevice)
		if err != nil || fresh == f.Key {
			t.Fatal(err)
		}
		_, _, err = f.Dev.Register(ctx, reg)
		modeltest.WantCode(t, err, models.EUNAUTHORIZED) // superseded
		if _, err = f.Dev.Authenticate(ctx, d.ID, sec); err != nil {
			t.Fatalf("a registered device stops working after a new key: %v", err)
		}
		reg.InstallationKey = fresh
		if _, _, err = f.Dev.Register(ctx, reg); err != nil {
			t.Fatalf("new key: %v", err)
		}
		_, err = f.Dev.InstallKey(ctx, f.Org.ID, "Other")
		modeltest.WantCode(t, err, models.EINVALID)
	})
}

func TestDeviceStore_Register(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		if d.AgentStatus(time.Now()) != devices.AgentPending {
			t.Errorf("status after registration = %s", d.AgentStatus(time.Now()))
		}
		if _, err := f.Dev.Authenticate(ctx, d.ID, sec+"x"); models.ErrorCode(err) != models.EUNAUTHORIZED {
			t.Errorf("wrong secret: %v", err)
		}
		if _, err := f.Dev.Authenticate(ctx, d.ID+1, sec); models.ErrorCode(err) != models.EUNAUTHORIZED {
			t.Errorf("wrong id: %v", err)
		}
		var hash []byte
		if err := db.NewSelect().Table("devices").Column("secret_hash").Where("id = ?", d.ID).Scan(ctx, &hash); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(hash, []byte(sec)) || len(hash) != 32 {
			t.Errorf("secret stored as %x", hash)
		}
		if _, err := f.CheckIn(t, d.ID, sec, devices.CheckIn{Facts: d.DeviceFacts, Accounts: accounts("a")}); err != nil {
			t.Fatal(err)
		}
		// The agent registering again with its credential takes over its
		// row: new secret (the old one dies), new facts, accounts kept.
		fa := modeltest.Facts("PC1-renamed", "S1")
		d2, sec2, err := f.Dev.Register(ctx, devices.Registration{InstallationKey: f.Key, AgentType: devices.AgentDevice,
			Platform: "windows", Facts: fa, DeviceID: d.ID, DeviceSecret: sec})
		if err != nil {
			t.Fatal(err)
		}
		if d2.ID != d.ID || d2.Name != "PC1-renamed" || d2.AgentStatus(time.Now()) != devices.AgentPending {
			t.Errorf("re-registration: id %d (was %d), name %s, status %s", d2.ID, d.ID, d2.Name, d2.AgentStatus(time.Now()))
		}
		if _, err = f.Dev.Authenticate(ctx, d.ID, sec); err == nil {
			t.Error("the old secret still works")
		}
		if _, err = f.Dev.Authenticate(ctx, d.ID, sec2); err != nil {
			t.Errorf("the new secret: %v", err)
		}
		got, err := f.Dev.Get(ctx, f.Org.ID, d.ID)
		if err != nil || got.TotalLocalAccounts != 1 || got.PossibleDuplicateOf != nil {
			t.Errorf("taken-over device %+v, %v", got, err)
		}
		// No serial number: the DNS host name names the machine, without
		// regard to case (a live device: the second is its duplicate).
		h := modeltest.Facts("H", "")
		h.DNSHostname = "host.corp"
		dh, _ := f.Register(t, h)
		h.DNSHostname = "HOST.corp"
		dh2, _ := f.Register(t, h)
		if dh2.ID == dh.ID || dh2.PossibleDuplicateOf == nil || *dh2.PossibleDuplicateOf != dh.ID {
			t.Errorf("same host name: %d duplicate of %v, want a new device flagged as a duplicate of %d", dh2.ID, dh2.PossibleDuplicateOf, dh.ID)
		}
		other, _ := f.Register(t, modeltest.Facts("PC3", "S3"))
		if other.ID == d.ID {
			t.Error("another serial took over")
		}
		// Another organization sees none of them.
		org2 := modeltest.NewOrg(t, f.Store)
		_, err = f.Dev.Get(ctx, org2.ID, d.ID)
		var me *models.Error
		if !errors.As(err, &me) || me.Code != models.ENOTFOUND || me.Title != "Device Not Found" {
			t.Errorf("other org: %v", err)
		}
		_, err = f.Dev.Delete(ctx, org2.ID, d.ID)
		modeltest.WantCode(t, err, models.ENOTFOUND)

		for _, bad := range []func(*devices.DeviceFacts){
			func(x *devices.DeviceFacts) { x.OSType = "BeOS" },
			func(x *devices.DeviceFacts) { x.JoinType = "Joined" },
			func(x *devices.DeviceFacts) { x.Name = "" },
			func(x *devices.DeviceFacts) { x.IPAddress = "999.1.1.1" },
			func(x *devices.DeviceFacts) { x.Owner = strings.Repeat("o", 300) },
		} {
			fa := modeltest.Facts("B", "SB")
			bad(&fa)
			_, _, err = f.Dev.Register(ctx, devices.Registration{InstallationKey: f.Key, AgentType: devices.AgentDevice, Platform: "linux", Facts: fa})
			modeltest.WantCode(t, err, models.EINVALID)
		}
		_, _, err = f.Dev.Register(ctx, devices.Registration{InstallationKey: f.Key, AgentType: devices.AgentDevice, Platform: "amiga", Facts: modeltest.Facts("B", "SB")})
		modeltest.WantCode(t, err, models.EINVALID)
	})
}

func TestDeviceStore_AgentStatus(t *testing.T) {
	now := time.Now()
	last := now.Add(-2 * time.Minute)
	d := &devices.Device{CheckinIntervalSeconds: 60, LastContactTime: &last}
	if s := d.AgentStatus(now); s != devices.AgentActive {
		t.Errorf("two missed = %s", s)
	}
	old := now.Add(-181 * time.Second)
	d.LastContactTime = &old
	if s := d.AgentStatus(now); s != devices.AgentInactive {
		t.Errorf("three missed = %s", s)
	}
	d.LastContactTime = &last
	d.UninstallRequestedAt = &now
	if s := d.AgentStatus(now); s != devices.AgentInactive {
		t.Errorf("uninstalled = %s", s)
	}
}

func TestDeviceStore_CheckInAndLinks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 3)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		in := devices.CheckIn{Facts: d.DeviceFacts, Accounts: accounts("alice", "bob", "Administrator")}
		if cmds, err := f.CheckIn(t, d.ID, sec, in); err != nil || len(cmds) != 0 {
			t.Fatalf("first check-in: %v %v", cmds, err)
		}
		got, _ := f.Dev.Get(ctx, f.Org.ID, d.ID)
		if got.AgentStatus(time.Now()) != devices.AgentActive || got.TotalLocalAccounts != 3 || got.LinkedLocalAccounts != 0 {
			t.Fatalf("after check-in: %s, %d/%d", got.AgentStatus(time.Now()), got.TotalLocalAccounts, got.LinkedLocalAccounts)
		}
		accs, _ := f.Dev.Accounts(ctx, f.Org.ID, d.ID)
		byName := map[string]devices.LocalAccount{}
		for _, a := range accs {
			byName[a.UserName] = a
		}
		alice, bob := byName["alice"], byName["bob"]

		// An unchanged check-in writes only last_contact_time.
		before := got.UpdatedAt
		time.Sleep(5 * time.Millisecond)
		if _, err := f.CheckIn(t, d.ID, sec, devices.CheckIn{Facts: d.DeviceFacts, Accounts: accounts("bob", "Administrator", "alice")}); err != nil {
			t.Fatal(err)
		}
		if err := f.Dev.FlushContacts(ctx); err != nil {
			t.Fatal(err)
		}
		again, _ := f.Dev.Get(ctx, f.Org.ID, d.ID)
		if !again.UpdatedAt.Equal(before) || !again.LastContactTime.After(*got.LastContactTime) {
			t.Errorf("unchanged check-in: updated_at %v -> %v, last contact %v -> %v", before, again.UpdatedAt, got.LastContactTime, again.LastContactTime)
		}

		// Link: pending, a command with its arguments, the ack makes it linked.
		_, err := f.Dev.Link(ctx, f.Org.ID, d.ID, alice.ID, devices.LinkRequest{UserID: f.Users[0].ID, PermissionLevel: "Administrator", Actor: "admin"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Dev.Link(ctx, f.Org.ID, d.ID, alice.ID, devices.LinkRequest{UserID: f.Users[1].ID, PermissionLevel: "Standard"})
		if models.ErrorCode(err) != models.ECONFLICT || !strings.Contains(err.Error(), "pending_link") {
			t.Errorf("link of a pending account: %v", err)
		}
		_, err = f.Dev.Link(ctx, f.Org.ID, d.ID, bob.ID, devices.LinkRequest{UserID: f.Users[0].ID, PermissionLevel: "Standard"})
		modeltest.WantCode(t, err, models.ECONFLICT) // one user per device
		_, err = f.Dev.Link(ctx, f.Org.ID, d.ID, byName["Administrator"].ID, devices.LinkRequest{UserID: f.Users[2].ID,
			PermissionLevel: "Standard"})
		modeltest.WantCode(t, err, models.EINVALID)
		_, err = f.Dev.Unlink(ctx, f.Org.ID, d.ID, alice.ID, "admin", "")
		if models.ErrorCode(err) != models.ECONFLICT || !strings.Contains(err.Error(), "pending_link") {
			t.Errorf("unlink of a pending account: %v", err)
		}
		org2 := modeltest.NewOrg(t, f.Store)
		_, err = f.Dev.Link(ctx, org2.ID, d.ID, bob.ID, devices.LinkRequest{UserID: f.Users[1].ID, PermissionLevel: "Standard"})
		modeltest.WantCode(t, err, models.ENOTFOUND)

		cmds, err := f.CheckIn(t, d.ID, sec, in)
		if err != nil || len(cmds) != 1 || cmds[0].Type != devices.CmdLink || args(t, cmds[0])["user_name"] != "alice" {
			t.Fatalf("commands %+v, %v", cmds, err)
		}
		// Resent until acked.
		cmds2, _ := f.CheckIn(t, d.ID, sec, in)
		if len(cmds2) != 1 || cmds2[0].ID != cmds[0].ID {
			t.Fatalf("not resent: %+v", cmds2)
		}
		in.Acks = []devices.Ack{{CommandID: models.FormatID(cmds[0].ID), Status: "done"}}
		if left, ackErr := f.CheckIn(t, d.ID, sec, in); ackErr != nil || len(left) != 0 {
			t.Fatalf("after ack: %v %v", left, ackErr)
		}
		a, _ := f.Dev.Account(ctx, f.Org.ID, d.ID, alice.ID)
		if a.LinkStatus != devices.LinkLinked || a.LinkedAt == nil || a.LinkType != devices.LinkManual || *a.IdpUserID != f.Users[0].ID {
			t.Fatalf("after done ack: %+v", a)
		}
		got, _ = f.Dev.Get(ctx, f.Org.ID, d.ID)
		if got.LinkedLocalAccounts != 1 {
			t.Errorf("linked count %d", got.LinkedLocalAccounts)
		}
		// The same ack again changes nothing.
		if _, err = f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		in.Acks = nil

		// A failed ack: unlinked, the reason in the history.
		if _, err = f.Dev.Link(ctx, f.Org.ID, d.ID, bob.ID, devices.LinkRequest{UserID: f.Users[1].ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		cmds, _ = f.CheckIn(t, d.ID, sec, in)
		in.Acks = []devices.Ack{{CommandID: models.FormatID(cmds[0].ID), Status: "failed", Message: "no such account"}}
		if _, err = f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		in.Acks = nil
		b, _ := f.Dev.Account(ctx, f.Org.ID, d.ID, bob.ID)
		if b.LinkStatus != devices.LinkUnlinked || b.IdpUserID != nil {
			t.Errorf("after failed ack: %+v", b)
		}
		hist, _ := f.Dev.History(ctx, f.Org.ID)
		if last := hist[len(hist)-1]; last.Action != "link_failed" || last.Reason != "no such account" {
			t.Errorf("history ends with %+v", last)
		}

		// cancel-link withdraws the command.
		if _, err = f.Dev.Link(ctx, f.Org.ID, d.ID, bob.ID, devices.LinkRequest{UserID: f.Users[1].ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		if _, err = f.Dev.CancelLink(ctx, f.Org.ID, d.ID, bob.ID, "admin"); err != nil {
			t.Fatal(err)
		}
		if cmds, _ = f.CheckIn(t, d.ID, sec, in); len(cmds) != 0 {
			t.Errorf("withdrawn command sent: %+v", cmds)
		}
		_, err = f.Dev.CancelLink(ctx, f.Org.ID, d.ID, bob.ID, "admin")
		if models.ErrorCode(err) != models.ECONFLICT || !strings.Contains(err.Error(), "unlinked") {
			t.Errorf("cancel of an unlinked account: %v", err)
		}

		// Unlink: at once, with a command.
		if _, err = f.Dev.Unlink(ctx, f.Org.ID, d.ID, alice.ID, "admin", "left the team"); err != nil {
			t.Fatal(err)
		}
		got, _ = f.Dev.Get(ctx, f.Org.ID, d.ID)
		cmds, _ = f.CheckIn(t, d.ID, sec, in)
		if got.LinkedLocalAccounts != 0 || len(cmds) != 1 || cmds[0].Type != devices.CmdUnlink {
			t.Fatalf("unlink: linked %d, commands %+v", got.LinkedLocalAccounts, cmds)
		}
		in.Acks = []devices.Ack{{CommandID: models.FormatID(cmds[0].ID), Status: "done"}}
		if _, err = f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		in.Acks = nil

		// A vanished account goes with its link and pending command.
		if _, err = f.Dev.Link(ctx, f.Org.ID, d.ID, bob.ID, devices.LinkRequest{UserID: f.Users[1].ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		in.Accounts = accounts("alice", "Administrator", "carol")
		in.Accounts[0].PermissionLevel = "Admin"
		if err = in.Validate(); err != nil {
			t.Fatal(err)
		}
		cmds, err = f.CheckIn(t, d.ID, sec, in)
		if err != nil || len(cmds) != 0 {
			t.Fatalf("vanished account's command still sent: %+v %v", cmds, err)
		}
		accs, _ = f.Dev.Accounts(ctx, f.Org.ID, d.ID)
		names := []string{}
		for _, a := range accs {
			names = append(names, a.UserName+"/"+a.PermissionLevel)
		}
		if strings.Join(names, ",") != "Administrator/Standard,alice/Administrator,carol/Standard" {
			t.Errorf("accounts %v", names)
		}
		hist, _ = f.Dev.History(ctx, f.Org.ID)
		actions := []string{}
		for _, h := range hist {
			actions = append(actions, h.Action)
		}
		if strings.Join(actions, ",") != "link,link_confirmed,link,link_failed,link,cancel_link,unlink,link,account_removed" {
			t.Errorf("history %v", actions)
		}
	})
}

func TestDeviceStore_OfflineUsers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 2)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		u1, u2 := models.FormatID(f.Users[0].ID), models.FormatID(f.Users[1].ID)
		in := devices.CheckIn{Facts: d.DeviceFacts, OfflineUsers: []devices.OfflineUserReport{
			{ID: u1, UserName: "dev0@example.com", PrimarySource: []byte(`{"type":"local"}`)},
			{ID: u2, UserName: "dev1@example.com", EnrolledAuthenticators: []byte(`[{"authn_factor_type":"totp"}]`)}}}
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		list, _ := f.Dev.OfflineUsers(ctx, f.Org.ID, d.ID)
		if len(list) != 2 {
			t.Fatalf("offline users %+v", list)
		}
		removed, err := f.Dev.RemoveOfflineUsers(ctx, f.Org.ID, d.ID, []int64{f.Users[0].ID, 12345})
		if err != nil || len(removed) != 1 || removed[0] != f.Users[0].ID {
			t.Fatalf("removed %v, %v", removed, err)
		}
		list, _ = f.Dev.OfflineUsers(ctx, f.Org.ID, d.ID)
		if len(list) != 1 || list[0].UserID != f.Users[1].ID {
			t.Fatalf("after removal %+v", list)
		}
		// Still reported before the ack: still off the list.
		cmds, _ := f.CheckIn(t, d.ID, sec, in)
		if len(cmds) != 1 || cmds[0].Type != devices.CmdRemoveOfflineUser || args(t, cmds[0])["user_id"] != u1 {
			t.Fatalf("commands %+v", cmds)
		}
		if list, _ = f.Dev.OfflineUsers(ctx, f.Org.ID, d.ID); len(list) != 1 {
			t.Fatalf("reported again before the ack: %+v", list)
		}
		in.Acks = []devices.Ack{{CommandID: models.FormatID(cmds[0].ID), Status: "done"}}
		in.OfflineUsers = in.OfflineUsers[1:]
		if _, err = f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		n, _ := db.NewSelect().Table("device_offline_users").Where("device_id = ?", d.ID).Count(ctx)
		if n != 1 {
			t.Errorf("rows after ack %d", n)
		}
		_, err = f.Dev.RemoveOfflineUsers(ctx, modeltest.NewOrg(t, f.Store).ID, d.ID, []int64{f.Users[1].ID})
		modeltest.WantCode(t, err, models.ENOTFOUND)
		// A check-in reporting none removes the last one (its read is
		// skipped only when the device has none).
		in.Acks, in.OfflineUsers = nil, nil
		if _, err = f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		if list, _ = f.Dev.OfflineUsers(ctx, f.Org.ID, d.ID); len(list) != 0 {
			t.Errorf("reported none: %+v", list)
		}
	})
}

func TestDeviceStore_Delete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 1)
		for _, join := range []string{devices.JoinSvc, "ADJoined"} {
			fa := modeltest.Facts("PC-"+join, "S-"+join)
			fa.JoinType = join
			d, sec := f.Register(t, fa)
			in := devices.CheckIn{Facts: fa, Accounts: accounts("alice")}
			if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
				t.Fatal(err)
			}
			accs, _ := f.Dev.Accounts(ctx, f.Org.ID, d.ID)
			if _, err := f.Dev.Link(ctx, f.Org.ID, d.ID, accs[0].ID, devices.LinkRequest{UserID: f.Users[0].ID, PermissionLevel: "Standard"}); err != nil {
				t.Fatal(err)
			}
			after, err := f.Dev.Delete(ctx, f.Org.ID, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			_, getErr := f.Dev.Get(ctx, f.Org.ID, d.ID)
			if join == devices.JoinSvc {
				if after.DeletedAt == nil || models.ErrorCode(getErr) != models.ENOTFOUND {
					t.Errorf("%s: deleted %v, get %v", join, after.DeletedAt, getErr)
				}
			} else if getErr != nil || after.AgentStatus(time.Now()) != devices.AgentInactive {
				t.Errorf("%s: get %v, status %s", join, getErr, after.AgentStatus(time.Now()))
			}
			// The credential fetches only the uninstall (the link is withdrawn).
			cmds, err := f.CheckIn(t, d.ID, sec, in)
			if err != nil || len(cmds) != 1 || cmds[0].Type != devices.CmdUninstall {
				t.Fatalf("%s: commands %+v, %v", join, cmds, err)
			}
			in.Acks = []devices.Ack{{CommandID: models.FormatID(cmds[0].ID), Status: "done"}}
			if left, ackErr := f.CheckIn(t, d.ID, sec, in); ackErr != nil || len(left) != 0 {
				t.Fatalf("%s: ack answered %+v, %v", join, left, ackErr)
			}
			_, err = f.Dev.Authenticate(ctx, d.ID, sec)
			modeltest.WantCode(t, err, models.EUNAUTHORIZED)
			n, _ := db.NewSelect().Table("devices").Where("id = ?", d.ID).Count(ctx)
			if want := map[bool]int64{true: 0, false: 1}[join == devices.JoinSvc]; n != want {
				t.Errorf("%s: %d rows after the ack, want %d", join, n, want)
			}
		}
	})
}

// Concurrent check-ins and link changes of one device keep its account
// counts equal to its accounts.
func TestDeviceStore_CountsUnderConcurrency(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 4)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		if _, err := f.CheckIn(t, d.ID, sec, devices.CheckIn{Facts: d.DeviceFacts, Accounts: accounts("u0", "u1", "u2", "u3")}); err != nil {
			t.Fatal(err)
		}
		accs, _ := f.Dev.Accounts(ctx, f.Org.ID, d.ID)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 6; i++ {
					names := []string{"u0", "u1", "u2", "u3", fmt.Sprintf("g%d-%d", g, i%3)}
					in := devices.CheckIn{Facts: d.DeviceFacts, Accounts: accounts(names[:3+(g+i)%3]...)}
					if err := in.Validate(); err != nil {
						errs <- err
						return
					}
					dev, err := f.Dev.Authenticate(context.Background(), d.ID, sec)
					if err != nil {
						errs <- err
						return
					}
					cmds, err := f.Dev.CheckIn(context.Background(), dev, &in)
					if err != nil {
						errs <- err
						return
					}
					for _, c := range cmds {
						in.Acks = append(in.Acks, devices.Ack{CommandID: models.FormatID(c.ID), Status: "done"})
					}
					if len(in.Acks) > 0 {
						if _, err := f.Dev.CheckIn(context.Background(), dev, &in); err != nil {
							errs <- err
							return
						}
					}
				}
			}()
		}
		for _, a := range accs[:2] {
			_, _ = f.Dev.Link(ctx, f.Org.ID, d.ID, a.ID, devices.LinkRequest{UserID: f.Users[a.ID%4].ID, PermissionLevel: "Standard"})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, _ := f.Dev.Get(ctx, f.Org.ID, d.ID)
		total, _ := db.NewSelect().Table("device_accounts").Where("device_id = ?", d.ID).Count(ctx)
		linked, _ := db.NewSelect().Table("device_accounts").Where("device_id = ? AND link_status = 'linked'", d.ID).Count(ctx)
		if got.TotalLocalAccounts != int64(total) || got.LinkedLocalAccounts != int64(linked) {
			t.Errorf("counts %d/%d, rows %d/%d", got.TotalLocalAccounts, got.LinkedLocalAccounts, total, linked)
		}
	})
}

func args(t *testing.T, c devices.Command) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(c.Args, &m); err != nil {
		t.Fatalf("args %s: %v", c.Args, err)
	}
	return m
}

func TestDeviceStore_LinkingSettings(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 1)
		got, err := f.Dev.LinkingSettings(ctx, f.Org.ID)
		if err != nil || got.IsEnabled || got.AttributeValue != "email_local_part" {
			t.Fatalf("defaults %+v, %v", got, err)
		}
		got.IsEnabled, got.AttributeType, got.AttributeValue = true, "naming_format", "%first_name%.%last_name%"
		got.LinkRestrictedLocalAccounts = []string{"svc-backup"}
		if err = f.Dev.PutLinkingSettings(ctx, f.Org.ID, got); err != nil {
			t.Fatal(err)
		}
		again, _ := f.Dev.LinkingSettings(ctx, f.Org.ID)
		if !again.IsEnabled || again.AttributeValue != "%first_name%.%last_name%" || len(again.LinkRestrictedLocalAccounts) != 1 {
			t.Errorf("read back %+v", again)
		}
		for _, bad := range []func(*devices.AccountLinkingSettings){
			func(s *devices.AccountLinkingSettings) { s.AttributeType = "regex" },
			func(s *devices.AccountLinkingSettings) { s.AttributeValue = "%first_name%.%shoe_size%" },
			func(s *devices.AccountLinkingSettings) { s.AttributeValue = "no macro" },
			func(s *devices.AccountLinkingSettings) { s.AttributeType, s.AttributeValue = "attribute", "password" },
			func(s *devices.AccountLinkingSettings) { s.OnDemandProvisioning.DefaultPermissionLevel = "root" },
			func(s *devices.AccountLinkingSettings) { s.LinkRestrictedLocalAccounts = []string{""} },
		} {
			s := *again
			bad(&s)
			modeltest.WantCode(t, f.Dev.PutLinkingSettings(ctx, f.Org.ID, &s), models.EINVALID)
		}
		// The restricted names are the stored ones, matched without regard to case.
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		if _, err = f.CheckIn(t, d.ID, sec, devices.CheckIn{Facts: d.DeviceFacts, Accounts: accounts("SVC-Backup", "Administrator")}); err != nil {
			t.Fatal(err)
		}
		accs, _ := f.Dev.Accounts(ctx, f.Org.ID, d.ID)
		_, err = f.Dev.Link(ctx, f.Org.ID, d.ID, accs[1].ID, devices.LinkRequest{UserID: f.Users[0].ID, PermissionLevel: "Standard"})
		modeltest.WantCode(t, err, models.EINVALID)
		if _, err := f.Dev.Link(ctx, f.Org.ID, d.ID, accs[0].ID, devices.LinkRequest{UserID: f.Users[0].ID, PermissionLevel: "Standard"}); err != nil {
			t.Errorf("Administrator is no longer restricted: %v", err)
		}
	})
}

func TestDeviceStore_List(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		d1, sec1 := f.Register(t, modeltest.Facts("alpha", "S1"))
		f.Register(t, modeltest.Facts("beta", "S2"))
		fa := modeltest.Facts("gamma", "S3")
		fa.OSType, fa.AgentVersion = "Linux", "0.9.0"
		d3, sec3 := f.Register(t, fa)
		if _, err := f.CheckIn(t, d1.ID, sec1, devices.CheckIn{Facts: d1.DeviceFacts}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.CheckIn(t, d3.ID, sec3, devices.CheckIn{Facts: fa}); err != nil {
			t.Fatal(err)
		}
		// d3 missed three intervals.
		old := time.Now().UTC().Add(-time.Hour)
		if _, err := db.NewUpdate().Table("devices").Set("last_contact_time = ?", old).Set("inactive_after = ?", old.Add(3*time.Minute)).
			Where("id = ?", d3.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		versions := devices.AgentVersions{"windows": "1.0.0", "linux": "1.0.0"}
		list := func(org int64, filter, sort string) []string {
			t.Helper()
			q := url.Values{}
			if filter != "" {
				q.Set("filter", filter)
			}
			if sort != "" {
				q.Set("sort", sort)
			}
			p, err := listing.Parse(q, devices.DeviceListing)
			if err != nil {
				t.Fatal(err)
			}
			ds, meta, err := f.Dev.List(ctx, org, p, versions)
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, d := range ds {
				names = append(names, d.Name+"/"+d.ListedAgentStatus+"/"+strconv.FormatBool(d.IsAgentOutdated))
			}
			if meta.(*listing.CursorMeta).Total != int64(len(ds)) {
				t.Errorf("total %d for %d rows", meta.(*listing.CursorMeta).Total, len(ds))
			}
			return names
		}
		if got := strings.Join(list(f.Org.ID, "", "name"), ","); got != "alpha/active/false,beta/pending/false,gamma/inactive/true" {
			t.Errorf("all: %s", got)
		}
		if got := strings.Join(list(f.Org.ID, `agent_status eq "inactive" or agent_status eq "pending"`, "-name"), ","); got != "gamma/inactive/true,beta/pending/false" {
			t.Errorf("status filter: %s", got)
		}
		if got := strings.Join(list(f.Org.ID, `is_agent_outdated eq true`, ""), ","); got != "gamma/inactive/true" {
			t.Errorf("outdated filter: %s", got)
		}
		if got := strings.Join(list(f.Org.ID, `os_type eq "Windows" and name sw "B"`, ""), ","); got != "beta/pending/false" {
			t.Errorf("os filter: %s", got)
		}
		if got := list(modeltest.NewOrg(t, f.Store).ID, "", ""); len(got) != 0 {
			t.Errorf("another organization sees %v", got)
		}
	})
}

// Deleting a user unlinks their accounts: a linked one with an unlink
// command, a pending one with its link withdrawn.
func TestDeviceStore_UserDeleteUnlinks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 2)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		in := devices.CheckIn{Facts: d.DeviceFacts, Accounts: accounts("a", "b")}
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		accs, _ := f.Dev.Accounts(ctx, f.Org.ID, d.ID)
		u := f.Users[0]
		if _, err := f.Dev.Link(ctx, f.Org.ID, d.ID, accs[0].ID, devices.LinkRequest{UserID: u.ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		cmds, _ := f.CheckIn(t, d.ID, sec, in)
		in.Acks = []devices.Ack{{CommandID: models.FormatID(cmds[0].ID), Status: "done"}}
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		in.Acks = nil
		if _, err := f.Dev.Link(ctx, f.Org.ID, d.ID, accs[1].ID, devices.LinkRequest{UserID: f.Users[1].ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		// A second device: its account linked to the first user too, and
		// an account of nobody's that stays as it is.
		d2, sec2 := f.Register(t, modeltest.Facts("PC2", "S2"))
		in2 := devices.CheckIn{Facts: d2.DeviceFacts, Accounts: accounts("c", "d")}
		if _, err := f.CheckIn(t, d2.ID, sec2, in2); err != nil {
			t.Fatal(err)
		}
		accs2, _ := f.Dev.Accounts(ctx, f.Org.ID, d2.ID)
		if _, err := f.Dev.Link(ctx, f.Org.ID, d2.ID, accs2[0].ID, devices.LinkRequest{UserID: u.ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		cmds2, _ := f.CheckIn(t, d2.ID, sec2, in2)
		in2.Acks = []devices.Ack{{CommandID: models.FormatID(cmds2[0].ID), Status: "done"}}
		if _, err := f.CheckIn(t, d2.ID, sec2, in2); err != nil {
			t.Fatal(err)
		}
		in2.Acks = nil
		before, _ := f.Dev.History(ctx, f.Org.ID)

		if _, err := f.Store.Users.DeleteMany(ctx, f.Org.ID, []int64{u.ID, f.Users[1].ID}); err != nil {
			t.Fatal(err)
		}
		for _, dev := range []int64{d.ID, d2.ID} {
			got, _ := f.Dev.Accounts(ctx, f.Org.ID, dev)
			for _, a := range got {
				if a.LinkStatus != devices.LinkUnlinked || a.IdpUserID != nil || a.LinkCommandID != nil || a.LinkedAt != nil {
					t.Errorf("after the user delete: %+v", a)
				}
			}
		}
		cmds, _ = f.CheckIn(t, d.ID, sec, in)
		if len(cmds) != 1 || cmds[0].Type != devices.CmdUnlink || args(t, cmds[0])["user_name"] != "a" {
			t.Fatalf("commands %+v", cmds)
		}
		cmds2, _ = f.CheckIn(t, d2.ID, sec2, in2)
		if len(cmds2) != 1 || cmds2[0].Type != devices.CmdUnlink || args(t, cmds2[0])["user_name"] != "c" {
			t.Fatalf("commands of the second device %+v", cmds2)
		}
		for _, id := range []int64{d.ID, d2.ID} {
			dev, _ := f.Dev.Get(ctx, f.Org.ID, id)
			if dev.LinkedLocalAccounts != 0 || dev.TotalLocalAccounts != 2 {
				t.Errorf("device %d: linked %d of %d accounts, want 0 of 2", id, dev.LinkedLocalAccounts, dev.TotalLocalAccounts)
			}
		}
		hist, _ := f.Dev.History(ctx, f.Org.ID)
		added := map[string]int{}
		for _, h := range hist[len(before):] {
			added[h.Action+" "+h.UserName+" "+h.OldState]++
		}
		if want := map[string]int{"user_deleted a linked": 1, "user_deleted b pending_link": 1, "user_deleted c linked": 1}; !maps.Equal(added, want) {
			t.Errorf("history added %v, want %v", added, want)
		}
	})
}

// An unchanged check-in's contact time is written in a batch within
// ContactFlushInterval (or at FlushContacts), never moving a later time
// back on PostgreSQL; the device's pending commands come with its
// credential in one read and are answered from it.
func TestDeviceStore_ContactBatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 1)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		in := devices.CheckIn{Facts: d.DeviceFacts, Accounts: accounts("alice")}
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		first, _ := f.Dev.Get(ctx, f.Org.ID, d.ID)

		// Unchanged: the time waits in the process, then is written by the
		// scheduled flush.
		time.Sleep(5 * time.Millisecond)
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(devices.ContactFlushInterval + 5*time.Second)
		for {
			got, _ := f.Dev.Get(ctx, f.Org.ID, d.ID)
			if got.LastContactTime.After(*first.LastContactTime) {
				if !got.InactiveAfter.After(*first.InactiveAfter) {
					t.Errorf("inactive_after %v -> %v", first.InactiveAfter, got.InactiveAfter)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("last_contact_time still %v after %s", got.LastContactTime, devices.ContactFlushInterval)
			}
			time.Sleep(50 * time.Millisecond)
		}

		// A pending command is read with the credential and answered by an
		// unchanged check-in, again at the next one until acknowledged.
		accs, _ := f.Dev.Accounts(ctx, f.Org.ID, d.ID)
		if _, err := f.Dev.Link(ctx, f.Org.ID, d.ID, accs[0].ID, devices.LinkRequest{UserID: f.Users[0].ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			cmds, err := f.CheckIn(t, d.ID, sec, in)
			if err != nil || len(cmds) != 1 || cmds[0].Type != devices.CmdLink || !strings.Contains(string(cmds[0].Args), "alice") {
				t.Fatalf("commands %+v, %v", cmds, err)
			}
		}
		if _, err := f.Dev.AuthenticateCheckIn(ctx, d.ID, sec+"x"); models.ErrorCode(err) != models.EUNAUTHORIZED {
			t.Errorf("wrong secret: %v", err)
		}
		if _, err := f.Dev.AuthenticateCheckIn(ctx, d.ID+1, sec); models.ErrorCode(err) != models.EUNAUTHORIZED {
			t.Errorf("unknown device: %v", err)
		}
		if !sqldb.IsPostgres(db) {
			return
		}
		// A batched time older than the row's is not written.
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil { // pending now
			t.Fatal(err)
		}
		later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		if _, err := db.NewUpdate().Table("devices").Set("last_contact_time = ?", later).Where("id = ?", d.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if err := f.Dev.FlushContacts(ctx); err != nil {
			t.Fatal(err)
		}
		got, _ := f.Dev.Get(ctx, f.Org.ID, d.ID)
		if !got.LastContactTime.Equal(later) {
			t.Errorf("last_contact_time %v, want the later %v kept", got.LastContactTime, later)
		}
	})
}

// Store.Close writes the contact times still waiting for their batch.
func TestDeviceStore_CloseWritesContacts(t *testing.T) {
	dsn := dbtest.PostgresURL(t)
	ctx := t.Context()
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Close() }() // only read: a close error tells the test nothing
	f := modeltest.NewDeviceFixture(t, db, 0)
	d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
	in := devices.CheckIn{Facts: d.DeviceFacts}
	if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
		t.Fatal(err)
	}
	first, _ := f.Dev.Get(ctx, f.Org.ID, d.ID)
	time.Sleep(5 * time.Millisecond)
	if _, err := f.CheckIn(t, d.ID, sec, in); err != nil { // unchanged: batched
		t.Fatal(err)
	}
	if err := f.Store.Close(); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	if err := reader.NewSelect().Table("devices").Column("last_contact_time").Where("id = ?", d.ID).Scan(ctx, &last); err != nil {
		t.Fatal(err)
	}
	if !last.After(*first.LastContactTime) {
		t.Errorf("last_contact_time %v after Close, want after %v", last, first.LastContactTime)
	}
}
