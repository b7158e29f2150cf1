// Command syncbench measures the account-linking sync (POST
// /device-account-linking/sync-now) on PostgreSQL, in one run:
//
//	go run ./cmd/syncbench [-devices 10000] [-accounts 5]
//
// It seeds three organizations alike into a throwaway PostgreSQL cluster (or
// the database IAM_BENCH_DATABASE_URL names, migrated first; the rows stay):
// N users (user<i>@example.com) and two more whose email local part is
// "shared", and N devices with M local accounts each (user<i>, USER<i>,
// Administrator, shared, nobody<i>, then extra<k>): one account per device
// matches exactly one user, the others are skipped for each of the reasons a
// sync has. Settings: attribute email_local_part. Then it times, on the same
// data in the same run:
//
//   - the sync as the product runs it: a job through a Temporal server and a
//     worker in this process, from the job's start to its end (after a
//     warm-up sync of 100 devices of a fourth organization, since a freshly
//     started server is busy for a while);
//   - the same sync's store batches called one after the other, without
//     the workflow engine (its database share);
//   - one set-based UPDATE making the same links
//     (models.DeviceStore.SyncLinksSetBased), without the commands, history
//     and per-account results the sync also writes;
//
// checks that the three made the same links, and prints the times and the
// ratio of the sync to the one statement.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/server/temporaltest"

	"iam/api/jobrun"
	"iam/cmd/internal/benchrun"
	"iam/models/dbtest/pgcluster"
	devicesmodel "iam/models/devices"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/sqldb"
	modelstore "iam/models/store"
	"iam/worker"
	"iam/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "syncbench:", err)
		os.Exit(1)
	}
}

const benchPGConfig = `
shared_buffers = 256MB
max_wal_size = 1GB
`

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) (err error) {
	out := benchrun.NewReport(stdout)
	defer benchrun.Cleanup(&err, out.Err) // a report cut short fails the run
	fs := flag.NewFlagSet("syncbench", flag.ContinueOnError)
	devices := fs.Int("devices", 10_000, "devices per organization")
	accounts := fs.Int("accounts", 5, "local accounts per device (at least 5)")
	trace := fs.Bool("trace", false, "print the time (2) spent in each kind of statement bun sends")
	if err = fs.Parse(args); err != nil {
		return err
	}
	if *accounts < 5 || *devices < 1 {
		return errors.New("-devices at least 1, -accounts at least 5")
	}
	dsn, stopPG, err := benchrun.Postgres(ctx, getenv, pgcluster.Options{Config: benchPGConfig, Prefix: "iam-syncbench-pg-"}, out)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, stopPG)
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, db.Close)
	if !sqldb.IsPostgres(db) {
		return errors.New("the benchmark needs PostgreSQL")
	}
	if _, err = sqldb.MigrateUp(ctx, db); err != nil {
		return err
	}
	store := modelstore.NewStore(db)

	t0 := time.Now()
	var orgs [3]*identity.Organization
	for i := range orgs {
		if orgs[i], err = seedOrg(ctx, db, store, fmt.Sprint("syncbench ", i), *devices, *accounts); err != nil {
			return err
		}
	}
	warmup, err := seedOrg(ctx, db, store, "syncbench warm-up", 100, *accounts)
	if err != nil {
		return err
	}
	total := *devices * *accounts
	out.Printf("seeded 3 organizations × %d devices × %d accounts (%d accounts, %d users each) in %s\n",
		*devices, *accounts, total, *devices+2, time.Since(t0).Round(time.Millisecond))
	if _, err = db.ExecContext(ctx, "VACUUM ANALYZE"); err != nil {
		return err
	}

	// (1) The sync as a job through Temporal.
	out.Printf("starting an in-process Temporal server and worker ...\n")
	ts := temporaltest.NewServer()
	defer ts.Stop()
	tc := ts.GetDefaultClient()
	if err = worker.EnsureSearchAttributes(ctx, tc, ts.GetDefaultNamespace()); err != nil {
		return err
	}
	w := worker.NewOn(tc, workflows.TaskQueue, worker.Deps{Store: store})
	if err = w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	launcher := &jobrun.Launcher{Client: tc, Store: store, Log: slog.New(slog.DiscardHandler)}
	// A fresh Temporal server is busy for a while after its start (task
	// queues, namespace caches): a small sync first, so that (1) times the
	// sync on a running server, as the product's are.
	syncJob := func(orgID int64) (*jobs.Job, time.Duration, error) {
		job, _, startErr := store.Devices.StartSync(ctx, orgID, 0)
		if startErr != nil {
			return nil, 0, startErr
		}
		began := time.Now()
		if launchErr := launcher.Launch(ctx, job); launchErr != nil {
			return nil, 0, launchErr
		}
		for {
			j, getErr := store.Jobs.Get(ctx, orgID, job.ID)
			if getErr != nil {
				return nil, 0, getErr
			}
			if j.Status.Finished() {
				return j, time.Since(began), nil
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	warm, took, err := syncJob(warmup.ID)
	if err != nil {
		return err
	}
	if warm.Status != jobs.JobCompleted {
		return fmt.Errorf("the warm-up sync ended %s: %s", warm.Status, warm.Message)
	}
	out.Printf("warm-up sync job of %d accounts: %s\n", warm.Processed, took.Round(time.Millisecond))
	job, asJob, err := syncJob(orgs[0].ID)
	if err != nil {
		return err
	}
	if job.Status != jobs.JobCompleted || job.Processed != int64(total) {
		return fmt.Errorf("the sync job ended %s, %d of %d processed: %s", job.Status, job.Processed, total, job.Message)
	}
	out.Printf("(1) sync job through Temporal: %s (%d accounts, %d linked, %.0f accounts/s)\n",
		asJob.Round(time.Millisecond), job.Processed, job.SuccessCount, float64(job.Processed)/asJob.Seconds())

	// (2) The same batches without the workflow engine.
	set, err := store.Devices.LinkingSettings(ctx, orgs[1].ID)
	if err != nil {
		return err
	}
	job2, _, err := store.Devices.StartSync(ctx, orgs[1].ID, 0)
	if err != nil {
		return err
	}
	if _, err = store.Jobs.Start(ctx, orgs[1].ID, job2.ID); err != nil {
		return err
	}
	hook := &statementTimes{by: map[string]time.Duration{}}
	batchStore := store
	if *trace {
		batchStore = modelstore.NewStore(db.WithQueryHook(hook))
	}
	t0 = time.Now()
	batches := 0
	var res *devicesmodel.SyncBatchResult
	for res == nil || !res.Done {
		if res, err = batchStore.Devices.SyncBatch(ctx, orgs[1].ID, job2.ID, set, workflows.SyncBatchSize); err != nil {
			return err
		}
		batches++
	}
	asBatches := time.Since(t0)
	out.Printf("(2) the same %d batches of %d, store only: %s (%d linked)\n",
		batches, workflows.SyncBatchSize, asBatches.Round(time.Millisecond), res.Progress.Success)
	if *trace {
		hook.print(out, asBatches)
	}

	// (3) One statement.
	t0 = time.Now()
	n, err := store.Devices.SyncLinksSetBased(ctx, orgs[2].ID, set)
	if err != nil {
		return err
	}
	oneStatement := time.Since(t0)
	out.Printf("(3) one set-based UPDATE: %s (%d linked)\n", oneStatement.Round(time.Millisecond), n)

	links := make([]string, 3)
	for i, org := range orgs {
		if links[i], err = linkDigest(ctx, db, org.ID); err != nil {
			return err
		}
	}
	if links[0] != links[1] || links[0] != links[2] || n != job.SuccessCount {
		return fmt.Errorf("the three runs made different links (%d linked by the job, %d by the statement)", job.SuccessCount, n)
	}
	out.Printf("the three made the same %d links\n\n", n)
	out.Printf("%-34s %10s %10s\n", "", "seconds", "× one SQL")
	for _, r := range []struct {
		name string
		d    time.Duration
	}{{"sync job (Temporal)", asJob}, {"sync batches (store only)", asBatches}, {"one set-based UPDATE", oneStatement}} {
		out.Printf("%-34s %10.3f %10.2f\n", r.name, r.d.Seconds(), r.d.Seconds()/oneStatement.Seconds())
	}
	return nil
}

// seedOrg makes an organization with its users, devices and settings.
func seedOrg(ctx context.Context, db *bun.DB, store *modelstore.Store, name string, devices, accounts int) (*identity.Organization, error) {
	org := &identity.Organization{Name: name}
	if err := store.Orgs.Create(ctx, org); err != nil {
		return nil, err
	}
	type user struct {
		bun.BaseModel `bun:"table:users"`
		ID            int64     `bun:"id"`
		OrgID         int64     `bun:"org_id"`
		Email         string    `bun:"email"`
		CreatedAt     time.Time `bun:"created_at"`
		UpdatedAt     time.Time `bun:"updated_at"`
	}
	now := time.Now().UTC()
	var users []user
	flush := func() error {
		if len(users) == 0 {
			return nil
		}
		_, err := db.NewInsert().Model(&users).Exec(ctx)
		users = users[:0]
		return err
	}
	for i := 1; i <= devices+2; i++ {
		email := fmt.Sprintf("user%d@example.com", i)
		switch i {
		case devices + 1:
			email = "shared@example.com"
		case devices + 2:
			email = "shared@example.org"
		}
		users = append(users, user{ID: sqldb.NewID(), OrgID: org.ID, Email: email, CreatedAt: now, UpdatedAt: now})
		if len(users) == 2000 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	devs := make([]devicesmodel.SeedDevice, devices)
	for i := range devs {
		names := []string{fmt.Sprint("user", i+1), fmt.Sprint("USER", i+1), "Administrator", "shared", fmt.Sprint("nobody", i+1)}
		for k := 5; k < accounts; k++ {
			names = append(names, fmt.Sprint("extra", k))
		}
		devs[i] = devicesmodel.SeedDevice{Name: fmt.Sprint("pc", i+1), Accounts: names}
	}
	if _, err := store.Devices.SeedDevices(ctx, org.ID, devs); err != nil {
		return nil, err
	}
	set := devicesmodel.DefaultAccountLinkingSettings()
	set.IsEnabled = true
	return org, store.Devices.PutLinkingSettings(ctx, org.ID, &set)
}

// linkDigest is a digest of the organization's automatic links by device
// name, account name and user email: equal for organizations linked alike.
func linkDigest(ctx context.Context, db *bun.DB, orgID int64) (string, error) {
	var digest string
	err := db.NewSelect().TableExpr("device_accounts AS a").
		Join("JOIN devices AS d ON d.id = a.device_id").Join("JOIN users AS u ON u.id = a.idp_user_id").
		ColumnExpr("md5(string_agg(d.name || '/' || a.user_name || '/' || u.email, ',' ORDER BY d.name, a.user_name))").
		Where("a.org_id = ? AND a.link_type = ?", orgID, devicesmodel.LinkAutomatic).Scan(ctx, &digest)
	return digest, err
}

// statementTimes sums the time of the statements it sees by their first
// words (-trace).
type statementTimes struct {
	mu  sync.Mutex
	off bool
	by  map[string]time.Duration
}

func (h *statementTimes) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	return ctx
}

func (h *statementTimes) AfterQuery(_ context.Context, ev *bun.QueryEvent) {
	q := strings.Join(strings.Fields(ev.Query), " ")
	if i := strings.Index(q, " WHERE "); i > 0 {
		q = q[:i]
	}
	q = q[:min(len(q), 90)]
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.off {
		h.by[q] += time.Since(ev.StartTime)
	}
}

// print prints the statements' times, the longest first, then what is
// left of total: the statements sent past bun (on PostgreSQL, the batch's
// writes: one statement per batch) and the Go code between statements.
func (h *statementTimes) print(out *benchrun.Report, total time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.off = true
	keys := make([]string, 0, len(h.by))
	for k, d := range h.by {
		keys = append(keys, k)
		total -= d
	}
	sort.Slice(keys, func(i, j int) bool { return h.by[keys[i]] > h.by[keys[j]] })
	for _, k := range keys[:min(len(keys), 12)] {
		out.Printf("    %8s  %s\n", h.by[k].Round(time.Millisecond), k)
	}
	out.Printf("    %8s  the rest: statements past bun's hooks (the batches' writes on PostgreSQL) and Go\n",
		total.Round(time.Millisecond))
}
