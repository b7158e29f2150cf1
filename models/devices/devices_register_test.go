package devices_test

import (
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/modeltest"
)

// A registration with a live device's serial number and no proof of its
// credential never takes it over: the device keeps working (its
// credential checks in, its pending commands reach it) and the newcomer is
// a new device flagged as its possible duplicate. Deleting either clears
// the flag.
func TestDeviceStore_RegisterDuplicate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 1)
		fa := modeltest.Facts("PC1", "S1")
		victim, sec := f.Register(t, fa)
		in := devices.CheckIn{Facts: fa, Accounts: accounts("alice")}
		if _, err := f.CheckIn(t, victim.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		accs, _ := f.Dev.Accounts(ctx, f.Org.ID, victim.ID)
		if _, err := f.Dev.Link(ctx, f.Org.ID, victim.ID, accs[0].ID, devices.LinkRequest{UserID: f.Users[0].ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}

		dup, dupSec, err := f.ReRegister(t, modeltest.Facts("Impostor", "S1"), 0, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if dup.ID == victim.ID || dup.PossibleDuplicateOf == nil || *dup.PossibleDuplicateOf != victim.ID {
			t.Fatalf("registration with a live serial: device %d, duplicate of %v; want a new device flagged as a duplicate of %d",
				dup.ID, dup.PossibleDuplicateOf, victim.ID)
		}
		// The victim still checks in and still gets its link command.
		cmds, err := f.CheckIn(t, victim.ID, sec, in)
		if err != nil || len(cmds) != 1 || cmds[0].Type != devices.CmdLink {
			t.Fatalf("the victim's check-in: %+v, %v", cmds, err)
		}
		got, err := f.Dev.Get(ctx, f.Org.ID, victim.ID)
		if err != nil || got.Name != "PC1" || got.TotalLocalAccounts != 1 {
			t.Fatalf("the victim's row: %+v, %v", got, err)
		}
		// The newcomer gets nothing of the victim's.
		cmds, err = f.CheckIn(t, dup.ID, dupSec, devices.CheckIn{Facts: modeltest.Facts("Impostor", "S1")})
		if err != nil || len(cmds) != 0 {
			t.Fatalf("the duplicate's check-in: %+v, %v", cmds, err)
		}
		listed, err := f.Dev.Get(ctx, f.Org.ID, dup.ID)
		if err != nil || listed.PossibleDuplicateOf == nil || *listed.PossibleDuplicateOf != victim.ID {
			t.Fatalf("the duplicate's row: %+v, %v", listed, err)
		}

		// A wrong credential, or another organization's device's, takes
		// nothing over.
		_, _, err = f.ReRegister(t, fa, victim.ID, sec+"x", 0)
		modeltest.WantCode(t, err, models.EUNAUTHORIZED)
		g := modeltest.NewDeviceFixture(t, db, 0)
		other, otherSec := g.Register(t, modeltest.Facts("Other", "S1"))
		_, _, err = f.ReRegister(t, fa, other.ID, otherSec, 0)
		modeltest.WantCode(t, err, models.EUNAUTHORIZED)

		// Deleting the original resolves the pair: the flag goes.
		if _, err = f.Dev.Delete(ctx, f.Org.ID, victim.ID); err != nil {
			t.Fatal(err)
		}
		if got, getErr := f.Dev.Get(ctx, f.Org.ID, dup.ID); getErr != nil || got.PossibleDuplicateOf != nil {
			t.Fatalf("after deleting the original: %+v, %v", got, getErr)
		}
		// Deleting the duplicate of another pair clears its own flag.
		a, _ := f.Register(t, modeltest.Facts("A", "SA"))
		b, _ := f.Register(t, modeltest.Facts("A2", "SA"))
		if b.PossibleDuplicateOf == nil || *b.PossibleDuplicateOf != a.ID {
			t.Fatalf("second pair: %v", b.PossibleDuplicateOf)
		}
		after, err := f.Dev.Delete(ctx, f.Org.ID, b.ID)
		if err != nil || after.PossibleDuplicateOf != nil {
			t.Fatalf("deleted duplicate: %+v, %v", after, err)
		}
	})
}

// A device inactive for its three intervals is taken over by the same
// machine's registration; one that checked in recently is not.
func TestDeviceStore_RegisterAbandoned(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		fa := modeltest.Facts("PC1", "S1")
		old, sec := f.Register(t, fa)
		if _, err := f.CheckIn(t, old.ID, sec, devices.CheckIn{Facts: fa, Accounts: accounts("alice")}); err != nil {
			t.Fatal(err)
		}
		if err := f.Dev.FlushContacts(ctx); err != nil {
			t.Fatal(err)
		}
		// Two intervals ago: still live.
		setContact := func(ago time.Duration) {
			at := time.Now().UTC().Add(-ago)
			if _, err := db.NewUpdate().Table("devices").Set("last_contact_time = ?", at).
				Set("agent_installed_time = ?", at).Where("id = ?", old.ID).Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		setContact(2 * devices.DefaultCheckinInterval)
		d, _, err := f.ReRegister(t, fa, 0, "", 0)
		if err != nil || d.ID == old.ID {
			t.Fatalf("live device: %+v, %v", d, err)
		}
		if _, err = f.Dev.Delete(ctx, f.Org.ID, d.ID); err != nil {
			t.Fatal(err)
		}
		// Past three intervals: taken over, its accounts kept.
		setContact(3*devices.DefaultCheckinInterval + time.Minute)
		d, newSec, err := f.ReRegister(t, fa, 0, "", 0)
		if err != nil || d.ID != old.ID || d.PossibleDuplicateOf != nil {
			t.Fatalf("abandoned device: %+v, %v; want %d taken over", d, err, old.ID)
		}
		if _, err = f.Dev.Authenticate(ctx, old.ID, sec); models.ErrorCode(err) != models.EUNAUTHORIZED {
			t.Errorf("the abandoned credential: %v", err)
		}
		got, err := f.Dev.Authenticate(ctx, old.ID, newSec)
		if err != nil || got.TotalLocalAccounts != 1 {
			t.Errorf("the new credential: %+v, %v", got, err)
		}
		// Registered and never checked in: its registration time counts.
		fb := modeltest.Facts("PC2", "S2")
		never, _ := f.Register(t, fb)
		if d, _, err := f.ReRegister(t, fb, 0, "", 0); err != nil || d.ID == never.ID {
			t.Fatalf("pending device taken over at once: %+v, %v", d, err)
		}
	})
}

// A device an admin deleted is never resurrected, ADJoined (which stays,
// inactive) or SvcJoined (gone at once): a later registration with its
// serial number is a new device, not flagged; the deleted device's
// credential cannot re-register.
func TestDeviceStore_RegisterAfterDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		for _, join := range []string{"ADJoined", devices.JoinSvc} {
			fa := modeltest.Facts("PC-"+join, "S-"+join)
			fa.JoinType = join
			d, sec := f.Register(t, fa)
			if _, err := f.Dev.Delete(ctx, f.Org.ID, d.ID); err != nil {
				t.Fatal(err)
			}
			_, _, err := f.ReRegister(t, fa, d.ID, sec, 0)
			if models.ErrorCode(err) != models.EUNAUTHORIZED {
				t.Errorf("%s: the deleted device's credential re-registers: %v", join, err)
			}
			again, _ := f.Register(t, fa)
			if again.ID == d.ID || again.PossibleDuplicateOf != nil {
				t.Errorf("%s: registration after delete: id %d (deleted %d), duplicate of %v", join, again.ID, d.ID, again.PossibleDuplicateOf)
			}
			got, err := f.Dev.Get(ctx, f.Org.ID, d.ID)
			if join == devices.JoinSvc {
				modeltest.WantCode(t, err, models.ENOTFOUND)
			} else if err != nil || got.UninstallRequestedAt == nil || got.AgentStatus(time.Now()) != devices.AgentInactive {
				t.Errorf("%s: the deleted device came back: %+v, %v", join, got, err)
			}
			// The deleted credential still fetches its uninstall, and
			// serves nothing else.
			dd, err := f.Dev.AuthenticateCheckIn(ctx, d.ID, sec)
			if err != nil || dd.UninstallRequestedAt == nil {
				t.Errorf("%s: check-in of the deleted device: %+v, %v", join, dd, err)
			}
			_, err = f.Dev.Authenticate(ctx, d.ID, sec)
			modeltest.WantCode(t, err, models.EUNAUTHORIZED)
		}
	})
}

// MaxDevices caps the organization's devices (the deleted SvcJoined ones
// do not count); taking over a device adds none.
func TestDeviceStore_RegisterCap(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		a, secA := f.Register(t, modeltest.Facts("A", "SA"))
		f.Register(t, modeltest.Facts("B", "SB"))
		_, _, err := f.ReRegister(t, modeltest.Facts("C", "SC"), 0, "", 2)
		modeltest.WantCode(t, err, models.ECONFLICT)
		if me := (*models.Error)(nil); !errors.As(err, &me) || me.Title != "Device Limit Reached" {
			t.Errorf("cap error %v", err)
		}
		// A duplicate is a new device too.
		_, _, err = f.ReRegister(t, modeltest.Facts("A2", "SA"), 0, "", 2)
		modeltest.WantCode(t, err, models.ECONFLICT)
		if d, _, takeErr := f.ReRegister(t, modeltest.Facts("A", "SA"), a.ID, secA, 2); takeErr != nil || d.ID != a.ID {
			t.Fatalf("takeover at the cap: %+v, %v", d, takeErr)
		}
		svc := modeltest.Facts("S", "SS")
		svc.JoinType = devices.JoinSvc
		s, _ := f.Register(t, svc)
		if _, err = f.Dev.Delete(ctx, f.Org.ID, s.ID); err != nil {
			t.Fatal(err)
		}
		if _, _, err = f.ReRegister(t, modeltest.Facts("C", "SC"), 0, "", 3); err != nil {
			t.Fatalf("a deleted SvcJoined device counts: %v", err)
		}
		// Installations have a cap of their own.
		nps, _ := f.Dev.InstallKey(ctx, f.Org.ID, devices.AgentNPS)
		reg := devices.Registration{InstallationKey: nps, AgentType: devices.AgentNPS, Platform: "windows", Facts: modeltest.Facts("N1", "N1"), MaxDevices: 1}
		if _, _, err = f.Dev.RegisterInstallation(ctx, reg); err != nil {
			t.Fatal(err)
		}
		reg.Facts = modeltest.Facts("N2", "N2")
		_, _, err = f.Dev.RegisterInstallation(ctx, reg)
		modeltest.WantCode(t, err, models.ECONFLICT)
	})
}
