package api_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	devicesmodel "iam/models/devices"
	"iam/models/identity"
	"iam/models/jobs"
)

// seedSyncDevices gives org n users (seedUsers: user<i>@example.com), two
// users whose email local part is "shared", and n devices pc<i> with five
// local accounts each: user<i> (one user matches: linked), USER<i> (the same
// user, already linked on the device: skipped), Administrator (restricted),
// shared (two users match) and nobody<i> (none does).
func seedSyncDevices(t *testing.T, f *faultEnv, org *identity.Organization, n int) {
	t.Helper()
	ctx := context.Background()
	seedUsers(t, f.DB, org, n)
	for _, e := range []string{"shared@example.com", "shared@example.org"} {
		if err := f.Store.Users.Create(ctx, &identity.User{OrgID: org.ID, Email: e, Status: identity.UserActive}, ""); err != nil {
			t.Fatal(err)
		}
	}
	devs := make([]devicesmodel.SeedDevice, n)
	for i := range devs {
		devs[i] = devicesmodel.SeedDevice{Name: fmt.Sprint("pc", i+1), Accounts: []string{
			fmt.Sprint("user", i+1), fmt.Sprint("USER", i+1), "Administrator", "shared", fmt.Sprint("nobody", i+1)}}
	}
	if _, err := f.Store.Devices.SeedDevices(ctx, org.ID, devs); err != nil {
		t.Fatal(err)
	}
	set := devicesmodel.DefaultAccountLinkingSettings()
	set.IsEnabled = true
	if err := f.Store.Devices.PutLinkingSettings(ctx, org.ID, &set); err != nil {
		t.Fatal(err)
	}
}

// syncOutcome is a sync job's results in row order, each with its device
// and account names and the email of the user linked: comparable across
// organizations.
type syncOutcome struct {
	Seq     int64  `bun:"seq"`
	Status  string `bun:"status"`
	Message string `bun:"message"`
	Device  string `bun:"device"`
	Account string `bun:"account"`
	Email   string `bun:"email"`
}

var digits = regexp.MustCompile(`[0-9]{6,}`)

func syncOutcomes(t *testing.T, db bun.IDB, jobID int64) []syncOutcome {
	t.Helper()
	var out []syncOutcome
	if err := db.NewSelect().TableExpr("job_results AS r").
		Join("JOIN device_accounts AS a ON a.id = CAST(r.entity_id AS BIGINT)").
		Join("JOIN devices AS d ON d.id = a.device_id").
		Join("LEFT JOIN users AS u ON u.id = a.idp_user_id").
		ColumnExpr("r.seq, r.status, r.message, d.name AS device, a.user_name AS account, coalesce(u.email, '') AS email").
		Where("r.job_id = ?", jobID).OrderExpr("r.seq").Scan(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		out[i].Message = digits.ReplaceAllString(out[i].Message, "#")
	}
	return out
}

// A sync over 10,000 devices × 5 accounts whose worker is SIGKILLed twice,
// each time right after a batch's commit and before its activity completes
// (so Temporal retries a chunk partly written), completes: every account
// has exactly one result, no account is linked twice (one link command and
// one history entry each), and the results, account by account, are those
// of an undisturbed run on another organization with the same data.
func TestSyncNow_WorkerKilledTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("long fault test")
	}
	const devices, perDevice = 10_000, 5
	const accounts = devices * perDevice
	ctx := context.Background()
	f := newFaultEnv(t, "sync-fault")
	disturbed, undisturbed := f.Org, f.NewBareOrg("Reference")
	began := time.Now()
	seedSyncDevices(t, f, disturbed, devices)
	seedSyncDevices(t, f, undisturbed, devices)
	t.Logf("seeded 2 × %d devices, %d accounts (%s)", devices, accounts, time.Since(began).Round(time.Millisecond))

	run := func(org *identity.Organization) int64 {
		acc := syncNow(t, f.Env, f.Token(org, "svc.device.WRITE"))
		id, _ := models.ParseID("id", acc.Data.ID)
		return id
	}
	began = time.Now()
	jobA := run(disturbed)
	f.killSelfAfterCommits(t, 2, 7, began, func() string {
		j, _ := f.Store.Jobs.Get(ctx, disturbed.ID, jobA)
		return fmt.Sprintf("%d of %d accounts processed", j.Processed, j.Total)
	})
	f.startWorker(t)
	a := f.WaitJob(disturbed, jobA, 3*time.Minute, finished)
	t.Logf("disturbed sync ended %s in %s", a.Status, time.Since(began).Round(time.Millisecond))
	began = time.Now()
	jobB := run(undisturbed)
	b := f.WaitJob(undisturbed, jobB, 3*time.Minute, finished)
	t.Logf("undisturbed sync ended %s in %s", b.Status, time.Since(began).Round(time.Millisecond))

	for _, j := range []*jobs.Job{a, b} {
		if j.Status != jobs.JobCompleted || j.Processed != accounts || j.Total != accounts || j.SuccessCount != devices {
			t.Fatalf("job %d: %s, %d of %d processed, %d linked", j.ID, j.Status, j.Processed, j.Total, j.SuccessCount)
		}
	}
	// No account linked twice: per account at most one link command and
	// one history entry; one linked (pending) account per device.
	for _, org := range []*identity.Organization{disturbed, undisturbed} {
		var twice int
		if err := f.DB.NewSelect().TableExpr("(SELECT account_id FROM device_commands WHERE org_id = ? AND type = 'link' GROUP BY account_id HAVING count(*) > 1) AS x", org.ID).
			ColumnExpr("count(*)").Scan(ctx, &twice); err != nil || twice != 0 {
			t.Errorf("%s: %d accounts with several link commands (%v)", org.Name, twice, err)
		}
		hist, _ := f.DB.NewSelect().Table("device_link_history").Where("org_id = ? AND action = 'link'", org.ID).Count(ctx)
		cmds, _ := f.DB.NewSelect().Table("device_commands").Where("org_id = ? AND type = 'link'", org.ID).Count(ctx)
		pending, _ := f.DB.NewSelect().Table("device_accounts").Where("org_id = ? AND link_status = ? AND link_type = 'Automatic'", org.ID, devicesmodel.LinkPending).Count(ctx)
		if hist != devices || cmds != devices || pending != devices {
			t.Errorf("%s: %d history entries, %d link commands, %d pending accounts; want %d each", org.Name, hist, cmds, pending, devices)
		}
	}
	ra, rb := syncOutcomes(t, f.DB, jobA), syncOutcomes(t, f.DB, jobB)
	if len(ra) != accounts || len(rb) != accounts {
		t.Fatalf("%d and %d results, want %d each", len(ra), len(rb), accounts)
	}
	for i := range ra {
		if ra[i].Seq != int64(i+1) || ra[i] != rb[i] {
			t.Fatalf("result %d differs: %+v vs %+v", i+1, ra[i], rb[i])
		}
	}
	if retried := retriedActivities(t, f.Temporal, jobs.JobWorkflowID(jobA)); retried < 2 {
		t.Errorf("%d chunks were retried, want at least the two whose worker died after a commit", retried)
	} else {
		t.Logf("%d chunks were retried after a kill", retried)
	}
}
