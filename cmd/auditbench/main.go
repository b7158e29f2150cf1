// Command auditbench measures sealing and verifying the audit log:
//
//	go run ./cmd/auditbench [-events 1000000] [-per-tx 1000] [-writers 2] [-only postgres|sqlite] [-cpuprofile FILE]
//
// It fills one organization with N audit events written as the service
// writes them: models.Record calls inside sqldb.InTx, which makes their
// rows just before the commit (SQLite numbers and hashes them there;
// PostgreSQL writes them unnumbered), -per-tx events a transaction, from
// -writers goroutines at once. On PostgreSQL it then times their numbering
// (sqldb.NumberAuditEvents, what every reader of the log runs first).
// The events are the service's kinds with bodies of their usual size: user
// creates, updates with their changes, deletes, group memberships of a few
// users, devices registered, tokens issued and jobs failed, each with its
// actor, client address, user agent and request id. Then it times
// DigestStore.Seal of all of them (one digest, as the seal schedule makes
// after a backlog) and DigestStore.Verify of them (what `iam audit verify`
// runs), and prints events, seconds and events/s of each. The issue's
// targets: each under 30 s for 1,000,000 events.
//
// PostgreSQL runs in a throwaway cluster (or the database
// IAM_BENCH_DATABASE_URL names, migrated first; its rows stay); SQLite in a
// file of a temporary folder. Both run unless -only names one.
package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"iam/cmd/internal/benchrun"
	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest/pgcluster"
	"iam/models/identity"
	"iam/models/sqldb"
	modelstore "iam/models/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "auditbench:", err)
		os.Exit(1)
	}
}

// benchPGConfig gives the cluster room for a million events.
const benchPGConfig = `
shared_buffers = 256MB
max_wal_size = 2GB
`

// The targets of issue 23, for 1,000,000 events.
const (
	sealTarget   = 30 * time.Second
	verifyTarget = 30 * time.Second
)

type config struct {
	events, perTx, writers int
	only, cpuProfile       string
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) (err error) {
	out := benchrun.NewReport(stdout)
	defer benchrun.Cleanup(&err, out.Err) // a report cut short fails the run
	fs := flag.NewFlagSet("auditbench", flag.ContinueOnError)
	var cfg config
	fs.IntVar(&cfg.events, "events", 1_000_000, "audit events of the organization")
	fs.IntVar(&cfg.perTx, "per-tx", 1000, "events a transaction writes")
	fs.IntVar(&cfg.writers, "writers", 2, "transactions writing at once")
	fs.StringVar(&cfg.only, "only", "", "run one database only: postgres or sqlite")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write CPU profiles of the seal and the verification to FILE.<database>.seal and FILE.<database>.verify")
	if err = fs.Parse(args); err != nil {
		return err
	}
	if cfg.events < 1 || cfg.perTx < 1 || cfg.writers < 1 {
		return errors.New("-events, -per-tx and -writers at least 1")
	}
	if cfg.only != "" && cfg.only != "postgres" && cfg.only != "sqlite" {
		return fmt.Errorf("-only %q: postgres or sqlite", cfg.only)
	}
	var results []result
	if cfg.only == "" || cfg.only == "postgres" {
		dsn, stopPG, startErr := benchrun.Postgres(ctx, getenv, pgcluster.Options{Config: benchPGConfig, Prefix: "iam-auditbench-pg-"}, out)
		if startErr != nil {
			return startErr
		}
		defer benchrun.Cleanup(&err, stopPG)
		r, benchErr := bench(ctx, out, cfg, "PostgreSQL", dsn)
		if benchErr != nil {
			return fmt.Errorf("postgres: %w", benchErr)
		}
		results = append(results, r)
	}
	if cfg.only == "" || cfg.only == "sqlite" {
		dir, tmpErr := os.MkdirTemp("", "iam-auditbench-")
		if tmpErr != nil {
			return tmpErr
		}
		defer benchrun.Cleanup(&err, func() error { return os.RemoveAll(dir) })
		r, benchErr := bench(ctx, out, cfg, "SQLite", "sqlite:"+filepath.Join(dir, "iam.db"))
		if benchErr != nil {
			return fmt.Errorf("sqlite: %w", benchErr)
		}
		results = append(results, r)
	}

	out.Printf("\n%-12s %10s %10s %12s %10s %10s %12s %10s %12s\n", "database", "events", "fill s", "fill ev/s", "number s", "seal s", "seal ev/s", "verify s", "verify ev/s")
	for _, r := range results {
		out.Printf("%-12s %10d %10.1f %12.0f %10.2f %10.2f %12.0f %10.2f %12.0f\n", r.database, r.events,
			r.fill.Seconds(), float64(r.events)/r.fill.Seconds(), r.number.Seconds(), r.seal.Seconds(), float64(r.events)/r.seal.Seconds(),
			r.verify.Seconds(), float64(r.events)/r.verify.Seconds())
	}
	if cfg.events == 1_000_000 {
		for _, r := range results {
			out.Printf("%s: seal %s the %v target, verify %s the %v target\n", r.database,
				within(r.seal, sealTarget), sealTarget, within(r.verify, verifyTarget), verifyTarget)
		}
	}
	return nil
}

func within(took, target time.Duration) string {
	if took < target {
		return "within"
	}
	return "MISSES"
}

type result struct {
	database     string
	events       int64
	fill, number time.Duration
	seal, verify time.Duration
	avgBody      float64
}

// bench fills, seals and verifies one database.
func bench(ctx context.Context, out *benchrun.Report, cfg config, database, dsn string) (r result, err error) {
	r.database = database
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return r, err
	}
	defer benchrun.Cleanup(&err, db.Close)
	if _, err = sqldb.MigrateUp(ctx, db); err != nil {
		return r, err
	}
	store := modelstore.NewStore(db)
	org := &identity.Organization{Name: "auditbench"}
	if err = store.Orgs.Create(ctx, org); err != nil {
		return r, err
	}
	head, err := sqldb.NumberAuditEvents(ctx, db, org.ID)
	if err != nil {
		return r, err
	}

	out.Printf("[%s] writing %d audit events, %d a transaction, %d writers (load average %s) ...\n", database, cfg.events, cfg.perTx, cfg.writers, loadAvg())
	began := time.Now()
	if err = fill(ctx, db, org.ID, int64(cfg.events)-head, cfg.perTx, cfg.writers); err != nil {
		return r, fmt.Errorf("fill: %w", err)
	}
	r.fill = time.Since(began)
	// On PostgreSQL the events are written unnumbered and numbered after
	// they commit, as the service's readers number them (docs/audit.md).
	began = time.Now()
	if r.events, err = sqldb.NumberAuditEvents(ctx, db, org.ID); err != nil {
		return r, err
	}
	r.number = time.Since(began)
	if err = db.NewSelect().Table("audit_events").ColumnExpr("AVG(LENGTH(body))").Where("org_id = ?", org.ID).Scan(ctx, &r.avgBody); err != nil {
		return r, err
	}
	out.Printf("[%s] %d events written in %s (%.0f events/s), bodies of %.0f bytes on average; numbered after the commits in %s\n",
		database, r.events, r.fill.Round(time.Millisecond), float64(r.events)/r.fill.Seconds(), r.avgBody, r.number.Round(time.Millisecond))
	if sqldb.IsPostgres(db) {
		if _, err = db.ExecContext(ctx, "VACUUM ANALYZE audit_events"); err != nil {
			return r, err
		}
	}

	signer, err := audit.NewSigner(make([]byte, ed25519.SeedSize))
	if err != nil {
		return r, err
	}
	var d *audit.Digest
	r.seal, err = timed(cfg.cpuProfile, database, "seal", func() error {
		var sealErr error
		d, sealErr = store.Digests.Seal(ctx, org.ID, signer, time.Now())
		return sealErr
	})
	if err != nil {
		return r, fmt.Errorf("seal: %w", err)
	}
	if d == nil || d.EventCount != r.events {
		return r, fmt.Errorf("the digest %+v does not seal the %d events", d, r.events)
	}
	out.Printf("[%s] Seal: %d events in %s (%.0f events/s; load average %s)\n", database, d.EventCount, r.seal.Round(time.Millisecond),
		float64(d.EventCount)/r.seal.Seconds(), loadAvg())

	var res audit.Result
	r.verify, err = timed(cfg.cpuProfile, database, "verify", func() error {
		var verifyErr error
		res, verifyErr = store.Digests.Verify(ctx, org.ID, []ed25519.PublicKey{signer.PublicKey()}, time.Time{})
		return verifyErr
	})
	if err != nil {
		return r, fmt.Errorf("verify: %w", err)
	}
	if len(res.Problems) > 0 || res.Sealed != r.events || res.Digests != 1 {
		return r, fmt.Errorf("the verification found %d problem(s) (first: %v), %d events sealed by %d digest(s); want none, %d by 1",
			len(res.Problems), res.Problems[:min(1, len(res.Problems))], res.Sealed, res.Digests, r.events)
	}
	out.Printf("[%s] Verify: %d events in %s (%.0f events/s; load average %s)\n", database, res.Sealed, r.verify.Round(time.Millisecond),
		float64(res.Sealed)/r.verify.Seconds(), loadAvg())
	return r, nil
}

// loadAvg is the machine's load average over 1, 5 and 15 minutes, the
// other load a figure was measured under ("?" where it cannot be read).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// timed runs fn and returns how long it took, under a CPU profile written
// to profile.<database>.<what> when profile is set.
func timed(profile, database, what string, fn func() error) (_ time.Duration, err error) {
	if profile != "" {
		f, createErr := os.Create(fmt.Sprintf("%s.%s.%s", profile, database, what)) //nolint:gosec // the file the operator named with -cpuprofile
		if createErr != nil {
			return 0, createErr
		}
		defer benchrun.Cleanup(&err, f.Close)
		if err = pprof.StartCPUProfile(f); err != nil {
			return 0, err
		}
		defer pprof.StopCPUProfile()
	}
	began := time.Now()
	err = fn()
	return time.Since(began), err
}

// fill writes n events of the organization, perTx a transaction, from
// writers goroutines.
func fill(ctx context.Context, db *bun.DB, orgID, n int64, perTx, writers int) error {
	if n <= 0 {
		return nil
	}
	txs := make(chan int64)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for first := range txs {
				count := min(int64(perTx), n-first)
				o := origin(first / int64(perTx))
				err := sqldb.InTx(models.WithOrigin(ctx, o), db, func(ctx context.Context, _ bun.Tx) error {
					for i := first; i < first+count; i++ {
						if err := models.Record(ctx, event(orgID, i)); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
send:
	for first := int64(0); first < n; first += int64(perTx) {
		select {
		case txs <- first:
		case err = <-errs:
			break send
		case <-ctx.Done():
			err = ctx.Err()
			break send
		}
	}
	close(txs)
	wg.Wait()
	close(errs)
	for e := range errs {
		err = errors.Join(err, e)
	}
	return err
}

// origin is who made transaction k's changes: an admin through the API,
// now and then a job.
func origin(k int64) models.Origin {
	o := models.Origin{
		Actor:     models.Actor{Type: models.ActorUser, ID: models.FormatID(100_000_000_000 + k%50), DisplayName: fmt.Sprintf("Admin %d of Example Corp", k%50)},
		IPAddress: fmt.Sprintf("203.0.113.%d", k%250+1),
		UserAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
		RequestID: fmt.Sprintf("01J%023d", k),
	}
	if k%10 == 9 {
		o.JobID = 200_000_000_000 + k
	}
	return o
}

// event is the i-th event of the fill: the service's usual kinds, with
// targets and changes as their store methods record them.
func event(orgID, i int64) models.AuditEvent {
	userID := 300_000_000_000 + i
	user := audit.Target(identity.UserTargetType, userID, fmt.Sprintf("User %d Lastname", i))
	ev := models.AuditEvent{OrgID: orgID}
	switch i % 20 {
	case 0, 1, 2, 3, 4:
		ev.Type, ev.Targets = audit.UserCreated, []models.EventTarget{user}
	case 5, 6, 7, 8, 9, 10, 11:
		user.Changes = []models.FieldChange{
			{Field: "department", Old: "Sales", New: "Marketing"},
			{Field: "title", Old: fmt.Sprintf("Account Executive %d", i%7), New: fmt.Sprintf("Senior Account Executive %d", i%7)},
		}
		ev.Type, ev.Targets = audit.UserUpdated, []models.EventTarget{user}
	case 12:
		user.Changes = []models.FieldChange{{Field: "password", Secret: true}}
		ev.Type, ev.Targets = audit.UserPasswordChanged, []models.EventTarget{user}
	case 13:
		ev.Type, ev.Targets = audit.UserDeleted, []models.EventTarget{user}
	case 14, 15:
		ev.Type = audit.GroupMembersAdded
		ev.Targets = []models.EventTarget{audit.Target(identity.GroupTargetType, 400_000_000_000+i%100, fmt.Sprintf("Team %d", i%100))}
		for k := range int64(5) {
			ev.Targets = append(ev.Targets, audit.Target(identity.UserTargetType, userID+k, fmt.Sprintf("User %d Lastname", i+k)))
		}
	case 16:
		ev.Type, ev.Targets = audit.DeviceRegistered, []models.EventTarget{audit.Target("device", 500_000_000_000+i, fmt.Sprintf("PC-%06d", i))}
	case 17, 18:
		ev.Type, ev.Targets = audit.OAuthTokenIssued, []models.EventTarget{audit.Target("client", 600_000_000_000+i%10, "Example CRM"), user}
	default:
		ev.Type, ev.Result, ev.Reason = audit.JobFailed, models.ResultFailure, "the workflow timed out after 6h0m0s"
		ev.Targets = []models.EventTarget{audit.Target("job", 200_000_000_000+i, "management/delete_users")}
	}
	return ev
}
