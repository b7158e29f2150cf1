package devices_test

import (
	"slices"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/modeltest"
	"iam/models/sqldb"
)

// TestDeviceStore_ChangedCheckInWritesEachColumn: a check-in that changes
// every fact and one account's fields writes each to its own column (the
// bound statements of devices_checkin_sql.go list columns and values
// apart), as read back by bun; the contact time and the account's times
// keep their microseconds.
func TestDeviceStore_ChangedCheckInWritesEachColumn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		in := devices.CheckIn{Facts: modeltest.Facts("PC1", "S1"), Accounts: accounts("alice", "bob")}
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		// Every fact a value of its own (the enumerations one of theirs).
		in.Facts = devices.DeviceFacts{Name: "f-name", OSType: "Linux", OSDistribution: "f-distribution",
			OSMajorVersion: "f-major", OSReleaseName: "f-release", OSBuildVersion: "f-build", SerialNumber: "f-serial",
			IPAddress: "10.9.8.7", AgentVersion: "f-agent", JoinType: "CloudJoined", Domain: "f-domain", Tenant: "f-tenant",
			DNSHostname: "f-dns", Container: "f-container", ManagedBy: "f-managed", Owner: "f-owner", MDM: "f-mdm",
			Description: "f-description"}
		login := time.Date(2026, 12, 1, 8, 30, 15, 123456000, time.UTC)
		in.Accounts[1].PermissionLevel, in.Accounts[1].LastLogin = "Administrator", &login
		before := time.Now().UTC().Truncate(time.Microsecond)
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		got, err := f.Dev.Get(ctx, f.Org.ID, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := in.Facts
		if err = want.Validate(); err != nil {
			t.Fatal(err)
		}
		if got.DeviceFacts != want {
			t.Errorf("facts\n got %+v\nwant %+v", got.DeviceFacts, want)
		}
		if got.LastContactTime == nil || got.LastContactTime.Before(before) || got.InactiveAfter == nil ||
			!got.InactiveAfter.After(*got.LastContactTime) || got.UpdatedAt.Before(before) {
			t.Errorf("times: contact %v, inactive after %v, updated %v; want after %v", got.LastContactTime, got.InactiveAfter, got.UpdatedAt, before)
		}
		accs, err := f.Dev.Accounts(ctx, f.Org.ID, d.ID)
		if err != nil || len(accs) != 2 {
			t.Fatalf("accounts %+v, %v", accs, err)
		}
		for _, a := range accs {
			switch a.UserName {
			case "alice":
				if a.PermissionLevel != "Standard" || a.LastLogin != nil {
					t.Errorf("alice changed: %+v", a)
				}
			case "bob":
				if a.PermissionLevel != "Administrator" || a.LastLogin == nil || !a.LastLogin.Equal(login) || a.UpdatedAt.Before(before) {
					t.Errorf("bob: %+v, want Administrator, last login %v", a, login)
				}
			}
		}
		// Two accounts changed at once, a last login cleared.
		in.Accounts[0].PermissionLevel, in.Accounts[1].LastLogin = "Administrator", nil
		if _, err = f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		if accs, err = f.Dev.Accounts(ctx, f.Org.ID, d.ID); err != nil || len(accs) != 2 {
			t.Fatalf("accounts %+v, %v", accs, err)
		}
		for _, a := range accs {
			if a.PermissionLevel != "Administrator" || a.LastLogin != nil {
				t.Errorf("%s: %s, last login %v; want Administrator, none", a.UserName, a.PermissionLevel, a.LastLogin)
			}
		}
		if got, err = f.Dev.Get(ctx, f.Org.ID, d.ID); err != nil {
			t.Fatal(err)
		}
		// The same report again is unchanged: the digest written is the
		// report's.
		again, err := f.Dev.AuthenticateCheckIn(ctx, d.ID, sec)
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Validate(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Dev.CheckIn(ctx, again, &in); err != nil {
			t.Fatal(err)
		}
		if after, _ := f.Dev.Get(ctx, f.Org.ID, d.ID); !after.UpdatedAt.Equal(got.UpdatedAt) {
			t.Errorf("the same report again rewrote the device (updated %v, then %v)", got.UpdatedAt, after.UpdatedAt)
		}
	})
}

// TestDeviceTables_LeaveRoomForCheckIns pins the fill factor of the
// tables check-ins rewrite (migration 20261208000100): without room on
// their pages, PostgreSQL moves each new version of a row to another page
// and writes every index again.
func TestDeviceTables_LeaveRoomForCheckIns(t *testing.T) {
	db := dbtest.Postgres(t)
	if !sqldb.IsPostgres(db) {
		t.Skip("PostgreSQL only")
	}
	for _, table := range []string{"devices", "device_accounts"} {
		var opts []string
		if err := db.NewRaw("SELECT coalesce(reloptions, '{}') FROM pg_class WHERE relname = ?", table).
			Scan(t.Context(), pgdialect.Array(&opts)); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(opts, "fillfactor=80") {
			t.Errorf("%s: options %v, want fillfactor=80", table, opts)
		}
	}
}

// TestDeviceStore_ChangedCheckInAnswersPendingCommands: a check-in that
// changes an account answers the commands waiting for the device (those
// AuthenticateCheckIn read), and one that removes the account of a pending
// link answers without the withdrawn command.
func TestDeviceStore_ChangedCheckInAnswersPendingCommands(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 1)
		d, sec := f.Register(t, modeltest.Facts("PC1", "S1"))
		in := devices.CheckIn{Facts: modeltest.Facts("PC1", "S1"), Accounts: accounts("alice", "bob")}
		if _, err := f.CheckIn(t, d.ID, sec, in); err != nil {
			t.Fatal(err)
		}
		accs, err := f.Dev.Accounts(ctx, f.Org.ID, d.ID)
		if err != nil || len(accs) != 2 || accs[0].UserName != "alice" {
			t.Fatalf("accounts %+v, %v", accs, err)
		}
		if _, err = f.Dev.Link(ctx, f.Org.ID, d.ID, accs[0].ID, devices.LinkRequest{UserID: f.Users[0].ID, PermissionLevel: "Standard"}); err != nil {
			t.Fatal(err)
		}
		in.Accounts[1].PermissionLevel = "Administrator"
		cmds, err := f.CheckIn(t, d.ID, sec, in)
		if err != nil || len(cmds) != 1 || cmds[0].Type != devices.CmdLink {
			t.Fatalf("changed check-in answered %+v, %v; want the link command", cmds, err)
		}
		in.Accounts = accounts("bob")
		if cmds, err = f.CheckIn(t, d.ID, sec, in); err != nil || len(cmds) != 0 {
			t.Fatalf("alice gone: answered %+v, %v; want no command", cmds, err)
		}
	})
}
