package devices_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/identity"
	jobsmodel "iam/models/jobs"
	"iam/models/modeltest"
	"iam/models/store"
)

// syncOrg makes an organization with users and two seeded devices whose
// accounts cover every case of a sync by email local part.
func syncOrg(t *testing.T, f *modeltest.DeviceFixture, s *store.Store) (*identity.Organization, map[string]int64, []int64) {
	t.Helper()
	org := modeltest.NewOrg(t, s)
	users := map[string]int64{}
	for _, u := range []struct{ email, first, last string }{
		{"alice@example.com", "Alice", "Smith"}, {"bob@example.com", "Bob", "Jones"},
		{"sam@example.com", "Sam", "Lee"}, {"sam@example.org", "Sam", "Lee"}, {"carol@example.com", "Carol", "King"},
	} {
		user := &identity.User{OrgID: org.ID, Email: u.email, FirstName: u.first, LastName: u.last, Status: identity.UserActive}
		if err := s.Users.Create(t.Context(), user, ""); err != nil {
			t.Fatal(err)
		}
		users[u.email] = user.ID
	}
	ids, err := f.Dev.SeedDevices(t.Context(), org.ID, []devices.SeedDevice{
		{Name: "pc1", Accounts: []string{"alice", "ALICE", "administrator", "nobody", "sam", "Alice.Smith"}},
		{Name: "pc2", Accounts: []string{"Bob", "alice", "carol"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return org, users, ids
}

type syncedLink struct {
	Device, Account string
	User            int64
}

func syncLinks(t *testing.T, db bun.IDB, orgID int64) []syncedLink {
	t.Helper()
	var out []syncedLink
	if err := db.NewSelect().TableExpr("device_accounts AS a").Join("JOIN devices AS d ON d.id = a.device_id").
		ColumnExpr("d.name AS device, a.user_name AS account, a.idp_user_id AS user").
		Where("a.org_id = ? AND a.link_type = ?", orgID, devices.LinkAutomatic).OrderExpr("d.name, a.user_name").
		Scan(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDeviceStore_Sync(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		org, users, devs := syncOrg(t, f, f.Store)

		// Off: no sync.
		_, _, err := f.Dev.StartSync(ctx, org.ID, 0)
		modeltest.WantCode(t, err, models.ECONFLICT)
		set := devices.DefaultAccountLinkingSettings()
		set.IsEnabled = true
		if err = f.Dev.PutLinkingSettings(ctx, org.ID, &set); err != nil {
			t.Fatal(err)
		}
		// carol is linked by hand to pc2's "Bob" before the sync; the sync
		// must not give her pc2's "carol" too.
		linkBy(t, f, org.ID, devs[1], "Bob", users["carol@example.com"])

		// Concurrent starts make one job.
		var wg sync.WaitGroup
		jobs := make([]int64, 8)
		created := make([]bool, 8)
		for i := range jobs {
			wg.Go(func() {
				j, c, startErr := f.Dev.StartSync(ctx, org.ID, 0)
				if startErr != nil {
					t.Error(startErr)
					return
				}
				jobs[i], created[i] = j.ID, c
			})
		}
		wg.Wait()
		n := 0
		for i := range jobs {
			if jobs[i] != jobs[0] {
				t.Fatalf("concurrent starts made jobs %v, want one", jobs)
			}
			if created[i] {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d starts created the job, want 1", n)
		}
		jobID := jobs[0]
		if _, err = f.Store.Jobs.Start(ctx, org.ID, jobID); err != nil {
			t.Fatal(err)
		}
		// Batches of two; a batch asked again after the end changes nothing.
		var res *devices.SyncBatchResult
		for i := 0; res == nil || !res.Done; i++ {
			if res, err = f.Dev.SyncBatch(ctx, org.ID, jobID, &set, 2); err != nil {
				t.Fatal(err)
			}
			if i > 10 {
				t.Fatal("the sync does not end")
			}
		}
		again, err := f.Dev.SyncBatch(ctx, org.ID, jobID, &set, 2)
		if err != nil || !again.Done || again.Progress != res.Progress {
			t.Fatalf("a batch after the end: %+v %v, want %+v", again, err, res.Progress)
		}
		// 8 unlinked accounts (pc2's Bob is pending): alice on pc1 and
		// pc2, carol skipped on pc2 (the user holds Bob), ALICE skipped
		// (alice holds alice on pc1), administrator restricted, nobody
		// and Alice.Smith unmatched, sam matched twice.
		if res.Progress != (jobsmodel.JobProgress{Processed: 8, Total: 8, Success: 2}) {
			t.Fatalf("progress %+v", res.Progress)
		}
		rs, err := f.Store.Jobs.Results(ctx, jobID, "", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		msgs := map[string]string{}
		for i, r := range rs {
			if r.Seq != int64(i+1) {
				t.Fatalf("result %d has seq %d", i, r.Seq)
			}
			msgs[r.EntityID] = r.Status + " " + r.Message
		}
		for _, d := range devs {
			accs, _ := f.Dev.Accounts(ctx, org.ID, d)
			for _, a := range accs {
				m, ok := msgs[models.FormatID(a.ID)]
				if a.UserName == "Bob" {
					if ok {
						t.Errorf("Bob (pending) has a result: %s", m)
					}
					continue
				}
				t.Logf("%s: %s", a.UserName, m)
				want := map[string]string{
					"alice":         "SUCCESS linked to user " + models.FormatID(users["alice@example.com"]),
					"ALICE":         "SKIPPED skipped: user " + models.FormatID(users["alice@example.com"]) + " is already linked",
					"administrator": `SKIPPED skipped: "administrator" is restricted`, "nobody": "SKIPPED skipped: no user matches",
					"Alice.Smith": "SKIPPED skipped: no user matches", "sam": `SKIPPED skipped: 2 users match "sam"`,
					"carol": "SKIPPED skipped: user " + models.FormatID(users["carol@example.com"]) + " is already linked",
				}[a.UserName]
				if len(m) < len(want) || m[:len(want)] != want {
					t.Errorf("%s: %q, want %q…", a.UserName, m, want)
				}
				if a.UserName == "alice" {
					if a.LinkStatus != devices.LinkPending || a.LinkType != devices.LinkAutomatic || a.IdpUserID == nil ||
						*a.IdpUserID != users["alice@example.com"] || a.LinkCommandID == nil || a.LinkPermissionLevel != a.PermissionLevel {
						t.Errorf("alice: %+v", a)
					}
					checkSyncLinkRows(t, db, org.ID, jobID, d, &a)
				}
			}
		}
		// Each link has its command and history entry naming the job.
		cmds, err := db.NewSelect().Table("device_commands").Where("org_id = ? AND type = ? AND status = ?", org.ID, devices.CmdLink, devices.CommandPending).Count(ctx)
		if err != nil || cmds != 3 {
			t.Errorf("%d pending link commands (%v), want 3 (carol's and the two of the sync)", cmds, err)
		}
		hist, err := db.NewSelect().Table("device_link_history").Where("org_id = ? AND job_id = ? AND link_type = ? AND actor = ?",
			org.ID, jobID, devices.LinkAutomatic, devices.SyncActor).Count(ctx)
		if err != nil || hist != 2 {
			t.Errorf("%d history entries of the sync (%v), want 2", hist, err)
		}
		// The job is over: a new start makes a new job.
		if err = f.Store.Jobs.Finish(ctx, org.ID, jobID, jobsmodel.JobCompleted, "", res.Progress); err != nil {
			t.Fatal(err)
		}
		j2, c2, err := f.Dev.StartSync(ctx, org.ID, 0)
		if err != nil || !c2 || j2.ID == jobID {
			t.Fatalf("start after the end: %v %v %v", j2, c2, err)
		}

		// The one-statement yardstick makes the same links on the same data.
		ref, _, _ := syncOrg(t, f, f.Store)
		linkBy(t, f, ref.ID, refDevice(t, db, ref.ID, "pc2"), "Bob", refUser(t, db, ref.ID, "carol@example.com"))
		linked, err := f.Dev.SyncLinksSetBased(ctx, ref.ID, &set)
		if err != nil || linked != 2 {
			t.Fatalf("set-based links: %d %v, want 2", linked, err)
		}
		got, want := syncLinks(t, db, ref.ID), syncLinks(t, db, org.ID)
		for i := range want {
			want[i].User = refUser(t, db, ref.ID, emailOf(t, db, want[i].User))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("set-based links %v, sync's %v", got, want)
		}
	})
}

func linkBy(t *testing.T, f *modeltest.DeviceFixture, orgID, deviceID int64, account string, userID int64) {
	t.Helper()
	accs, err := f.Dev.Accounts(t.Context(), orgID, deviceID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range accs {
		if a.UserName == account {
			if _, err := f.Dev.Link(t.Context(), orgID, deviceID, a.ID, devices.LinkRequest{UserID: userID,
				PermissionLevel: "Standard", Actor: "admin"}); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no account %s", account)
}

func refDevice(t *testing.T, db bun.IDB, orgID int64, name string) int64 {
	t.Helper()
	var id int64
	if err := db.NewSelect().Table("devices").Column("id").Where("org_id = ? AND name = ?", orgID, name).Scan(t.Context(), &id); err != nil {
		t.Fatal(err)
	}
	return id
}

func refUser(t *testing.T, db bun.IDB, orgID int64, email string) int64 {
	t.Helper()
	var id int64
	if err := db.NewSelect().Table("users").Column("id").Where("org_id = ? AND email = ?", orgID, email).Scan(t.Context(), &id); err != nil {
		t.Fatal(err)
	}
	return id
}

func emailOf(t *testing.T, db bun.IDB, id int64) string {
	t.Helper()
	var e string
	if err := db.NewSelect().Table("users").Column("email").Where("id = ?", id).Scan(t.Context(), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// A naming format matches without regard to case; literal text of the
// format is data, not SQL.
func TestDeviceStore_SyncNamingFormat(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		org, users, _ := syncOrg(t, f, f.Store)
		set := devices.DefaultAccountLinkingSettings()
		set.IsEnabled, set.AttributeType, set.AttributeValue = true, "naming_format", "%first_name%.%last_name%"
		if err := f.Dev.PutLinkingSettings(ctx, org.ID, &set); err != nil {
			t.Fatal(err)
		}
		job, _, err := f.Dev.StartSync(ctx, org.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err = f.Store.Jobs.Start(ctx, org.ID, job.ID); err != nil {
			t.Fatal(err)
		}
		res, err := f.Dev.SyncBatch(ctx, org.ID, job.ID, &set, 100)
		if err != nil || !res.Done || res.Progress.Success != 1 {
			t.Fatalf("%+v %v", res, err)
		}
		links := syncLinks(t, db, org.ID)
		if len(links) != 1 || links[0].Account != "Alice.Smith" || links[0].User != users["alice@example.com"] {
			t.Fatalf("links %+v", links)
		}
		set.AttributeValue = "%first_name%') OR 1=1 OR ('x'='"
		if n, err := f.Dev.SyncLinksSetBased(ctx, org.ID, &set); err != nil || n != 0 {
			t.Fatalf("a hostile format linked %d (%v)", n, err)
		}
	})
}

// Accounts of a device being uninstalled are no candidates of a sync.
func TestDeviceStore_SyncSkipsUninstalledDevices(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		u := &identity.User{OrgID: f.Org.ID, Email: "alice@example.com", Status: identity.UserActive}
		if err := f.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		devs, err := f.Dev.SeedDevices(ctx, f.Org.ID, []devices.SeedDevice{{Name: "gone", Accounts: []string{"alice"}}, {Name: "kept", Accounts: []string{"alice"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err = f.Dev.Delete(ctx, f.Org.ID, devs[0]); err != nil {
			t.Fatal(err)
		}
		set := devices.DefaultAccountLinkingSettings()
		set.IsEnabled = true
		if err = f.Dev.PutLinkingSettings(ctx, f.Org.ID, &set); err != nil {
			t.Fatal(err)
		}
		job, _, err := f.Dev.StartSync(ctx, f.Org.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err = f.Store.Jobs.Start(ctx, f.Org.ID, job.ID); err != nil {
			t.Fatal(err)
		}
		res, err := f.Dev.SyncBatch(ctx, f.Org.ID, job.ID, &set, 10)
		if err != nil || !res.Done || res.Progress != (jobsmodel.JobProgress{Processed: 1, Total: 1, Success: 1}) {
			t.Fatalf("%+v %v", res, err)
		}
		if links := syncLinks(t, db, f.Org.ID); len(links) != 1 || links[0].Device != "kept" {
			t.Fatalf("links %+v", links)
		}
	})
}

// An NPS extension or IIS module registers with its own type's key as an
// installation, not a device; the same server again takes over its row.
func TestDeviceStore_RegisterInstallation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		nps, err := f.Dev.InstallKey(ctx, f.Org.ID, devices.AgentNPS)
		if err != nil {
			t.Fatal(err)
		}
		fa := modeltest.Facts("NPS1", "")
		reg := devices.Registration{InstallationKey: nps, AgentType: devices.AgentNPS, Platform: "windows", Facts: fa}
		_, _, err = f.Dev.RegisterInstallation(ctx, devices.Registration{InstallationKey: f.Key, AgentType: devices.AgentNPS, Platform: "windows", Facts: fa})
		modeltest.WantCode(t, err, models.EUNAUTHORIZED)
		_, _, err = f.Dev.RegisterInstallation(ctx, devices.Registration{InstallationKey: nps, AgentType: devices.AgentDevice, Platform: "windows", Facts: fa})
		modeltest.WantCode(t, err, models.EINVALID)
		first, sec1, err := f.Dev.RegisterInstallation(ctx, reg)
		if err != nil {
			t.Fatal(err)
		}
		// No serial number: the DNS host name, without regard to case, names the server.
		reg.Facts.DNSHostname = "NPS1.CORP"
		again, sec2, err := f.Dev.RegisterInstallation(ctx, reg)
		if err != nil || again.ID != first.ID || sec1 == sec2 {
			t.Fatalf("again: %+v %v (first %d)", again, err, first.ID)
		}
		reg.Facts = modeltest.Facts("NPS2", "")
		if other, _, regErr := f.Dev.RegisterInstallation(ctx, reg); regErr != nil || other.ID == first.ID {
			t.Fatalf("another server: %+v %v", other, regErr)
		}
		counts, err := f.Dev.InstallationCounts(ctx, f.Org.ID)
		if err != nil || counts[devices.AgentNPS] != 2 || counts[devices.AgentIIS] != 0 {
			t.Fatalf("counts %v %v", counts, err)
		}
		if n, err := db.NewSelect().Table("devices").Where("org_id = ?", f.Org.ID).Count(ctx); err != nil || n != 0 {
			t.Fatalf("%d devices (%v), want none", n, err)
		}
	})
}

// checkSyncLinkRows checks the command and the history entry of the link a
// sync made for the account a of the device devID.
func checkSyncLinkRows(t *testing.T, db *bun.DB, orgID, jobID, devID int64, a *devices.LocalAccount) {
	t.Helper()
	ctx := t.Context()
	var cmd devices.Command
	if err := db.NewSelect().Model(&cmd).Where("id = ?", *a.LinkCommandID).Scan(ctx); err != nil {
		t.Fatalf("%s's link command: %v", a.UserName, err)
	}
	var args map[string]string
	if err := json.Unmarshal(cmd.Args, &args); err != nil {
		t.Fatalf("command args %s: %v", cmd.Args, err)
	}
	wantArgs := map[string]string{"account_id": models.FormatID(a.ID), "user_name": a.UserName,
		"idp_user_id": models.FormatID(*a.IdpUserID), "permission_level": a.PermissionLevel}
	if cmd.OrgID != orgID || cmd.DeviceID != devID || cmd.AccountID == nil || *cmd.AccountID != a.ID ||
		cmd.Type != devices.CmdLink || cmd.Status != devices.CommandPending || !maps.Equal(args, wantArgs) {
		t.Errorf("%s's link command %+v args %v, want args %v", a.UserName, cmd, args, wantArgs)
	}
	var evs []devices.LinkEvent
	if err := db.NewSelect().Model(&evs).Where("account_id = ? AND job_id = ?", a.ID, jobID).Scan(ctx); err != nil || len(evs) != 1 {
		t.Fatalf("%s's history entries of the sync: %d, %v", a.UserName, len(evs), err)
	}
	var devName string
	if err := db.NewSelect().Table("devices").Column("name").Where("id = ?", devID).Scan(ctx, &devName); err != nil {
		t.Fatal(err)
	}
	ev := evs[0]
	if ev.OrgID != orgID || ev.DeviceID != devID || ev.DeviceName != devName || ev.UserName != a.UserName ||
		ev.IdpUserID == nil || *ev.IdpUserID != *a.IdpUserID || ev.Action != "link" || ev.LinkType != devices.LinkAutomatic ||
		ev.OldState != devices.LinkUnlinked || ev.NewState != devices.LinkPending || ev.Actor != devices.SyncActor {
		t.Errorf("%s's history entry %+v", a.UserName, ev)
	}
}
