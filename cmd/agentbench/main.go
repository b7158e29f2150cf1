// Command agentbench measures the agent channel: it runs `iam serve` as a
// process on a throwaway PostgreSQL cluster, registers N simulated devices
// (10,000 by default) over POST /agent/v1/register, and then drives
// POST /agent/v1/checkin from a load generator in this process. It prints
// sustained check-ins per second and p50/p99 latency for
//
//   - unchanged: every check-in reports what the device reported before
//     (the steady state of a fleet);
//   - changed: every check-in changes one local account of its device (the
//     last_login of its first account flips between two values);
//
// each closed-loop (a fixed number of connections, each sending its next
// check-in as soon as the previous one is answered: the most the service
// sustains), and unchanged check-ins also open-loop at -rate (check-ins
// started on a fixed schedule whatever the answers, latency counted from
// the scheduled start, so that a slow service cannot hide its queue: the
// target's 1,700/s is 100,000 devices at a 60 s interval).
//
// The generator is kept light: request bodies and Authorization headers are
// built before the clock starts, one keep-alive HTTP client holds exactly
// -conns connections, answers are read and discarded. It shares the machine
// with the service, so the CPU seconds of the generator, of `iam serve` and
// of the PostgreSQL server are printed for each run.
//
// -statements N prints, after each run, the N statements that took the
// most of PostgreSQL's time (pg_stat_statements, planning included).
//
//	go run ./cmd/agentbench [-devices 10000] [-accounts 5] [-conns 32] [-duration 10s] [-rate 1700] [-only unchanged|changed] [-statements N] [-keep]
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"iam/cmd/internal/benchrun"
	"iam/cmd/internal/iamproc"
	"iam/models/dbtest/pgcluster"
	"iam/models/devices"
	"iam/models/identity"
	"iam/models/secret"
	"iam/models/sqldb"
	"iam/models/store"
)

type options struct {
	devices, accounts, conns int
	duration                 time.Duration
	rate                     float64
	only, logLevel           string
	keep                     bool
	statements               int
}

func main() {
	var o options
	flag.IntVar(&o.devices, "devices", 10_000, "simulated devices")
	flag.IntVar(&o.accounts, "accounts", 5, "local accounts per device")
	flag.IntVar(&o.conns, "conns", 32, "concurrent connections of the load generator")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured run")
	flag.Float64Var(&o.rate, "rate", 1700, "check-ins/s of the open-loop run of unchanged check-ins (0: closed-loop only)")
	flag.StringVar(&o.only, "only", "", "run one case only: unchanged or changed")
	flag.StringVar(&o.logLevel, "log-level", "info", "IAM_LOG_LEVEL of iam serve (info is the default a deployment runs with)")
	flag.IntVar(&o.statements, "statements", 0, "after each run, print the N statements that took the most database time (pg_stat_statements)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work folder (the service's log) and say where it is")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "agentbench:", err)
		os.Exit(1)
	}
}

const secretKey = "agentbench-secret-key-0123456789abcdef-0123456789" //nolint:gosec // the secret of the benchmark's throwaway service

// benchPGConfig is a production-like cluster for an update-heavy load:
// autovacuum on (the test default turns it off), room for the connections.
const benchPGConfig = `
shared_buffers = 128MB
autovacuum = on
` + benchrun.StatementsConfig

func run(ctx context.Context, o options) (err error) {
	work, err := os.MkdirTemp("", "iam-agentbench-")
	if err != nil {
		return err
	}
	if o.keep {
		defer fmt.Printf("work folder kept: %s\n", work)
	} else {
		defer benchrun.Cleanup(&err, func() error { return os.RemoveAll(work) })
	}
	if err = os.Chmod(work, 0o755); err != nil { //nolint:gosec // the PostgreSQL user must reach its folder
		return err
	}
	bin, err := iamproc.Build(work, "iam", "nodev") // serve as the image ships it
	if err != nil {
		return err
	}
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Config: benchPGConfig, Prefix: "iam-agentbench-pg-"})
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, pg.Stop)
	if out, createErr := pg.Command(ctx, "createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port()), "-U", "postgres", "bench").CombinedOutput(); createErr != nil {
		return fmt.Errorf("createdb: %w\n%s", createErr, out)
	}
	dsn := pg.URL("bench").String()
	encKey := secret.NewKey()
	env := []string{"IAM_DATABASE_URL=" + dsn, "IAM_SECRET_KEY=" + secretKey, "IAM_LOG_LEVEL=" + o.logLevel,
		"IAM_ENCRYPTION_KEY=" + encKey, "IAM_DATA_DIR=" + filepath.Join(work, "data"),
		// No Temporal: the agent channel does not use it (serve's client is lazy).
		"IAM_TEMPORAL_ADDRESS=127.0.0.1:1",
		// The devices all register from this one address, as fast as they can.
		"IAM_AGENT_REGISTRATIONS_PER_ADDRESS=1000000", "IAM_AGENT_REGISTRATIONS_PER_KEY=1000000",
		fmt.Sprintf("IAM_MAX_DEVICES_PER_ORG=%d", max(o.devices, 100_000))}
	if out, migrateErr := iamproc.Run(bin, env, "migrate", "up"); migrateErr != nil {
		return fmt.Errorf("migrate: %w\n%s", migrateErr, out)
	}
	key, err := installKey(ctx, dsn, encKey)
	if err != nil {
		return err
	}
	port, err := iamproc.FreePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	api, err := iamproc.Start(bin, work, "serve", append(env, "IAM_HTTP_ADDR="+addr))
	if err != nil {
		return err
	}
	defer api.Stop()
	base := "http://" + addr
	// /healthz, not /readyz: the benchmark runs no Temporal server.
	if err = iamproc.WaitFor(base+"/healthz", 2*time.Minute); err != nil {
		return err
	}
	pgPID := pg.PID()
	stmts, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, stmts.Close)

	g := newGenerator(base, max(o.conns, 256))
	fmt.Printf("registering %d devices (%d local accounts each) over %d connections ...\n", o.devices, o.accounts, o.conns)
	began := time.Now()
	if err := g.register(key, o.devices, o.accounts, o.conns); err != nil {
		return err
	}
	fmt.Printf("  %d registered in %.1f s (%.0f/s)\n", o.devices, time.Since(began).Seconds(), float64(o.devices)/time.Since(began).Seconds())
	// The first check-in of each device reports its accounts: not measured.
	first := g.measure(phase{mode: changedFirst, conns: o.conns, count: o.devices})
	fmt.Printf("  first check-ins (accounts created): %s\n", first.line())
	if first.errors > 0 {
		return fmt.Errorf("%d first check-ins failed: %s", first.errors, first.firstErr)
	}

	var results []*stats
	measure := func(name string, p phase) error {
		p.name = name
		if o.statements > 0 {
			if err := benchrun.ResetStatements(ctx, stmts); err != nil {
				return err
			}
		}
		sCPU, pCPU := iamproc.CPUTime(api.Pid()), iamproc.TreeCPU(pgPID)
		st := g.measure(p)
		st.serveCPU, st.pgCPU = iamproc.CPUTime(api.Pid())-sCPU, iamproc.TreeCPU(pgPID)-pCPU
		fmt.Printf("  %-44s %s\n", name, st.line())
		if o.statements > 0 {
			benchrun.PrintStatements(ctx, stmts, benchrun.NewReport(os.Stdout), o.statements, st.count)
		}
		results = append(results, st)
		if st.errors > 0 {
			return fmt.Errorf("%s: %d check-ins failed: %s", name, st.errors, st.firstErr)
		}
		return nil
	}
	for _, m := range []checkinMode{unchanged, changed} {
		if o.only != "" && o.only != m.String() {
			continue
		}
		fmt.Printf("%s check-ins ...\n", m)
		if err := measure(fmt.Sprintf("%s, closed loop, %d conns", m, o.conns),
			phase{mode: m, conns: o.conns, duration: o.duration}); err != nil {
			return err
		}
		if o.rate > 0 && m == unchanged { // the target's case; changed check-ins are measured closed-loop
			if err := measure(fmt.Sprintf("%s, open loop, %.0f/s", m, o.rate),
				phase{mode: m, conns: max(o.conns, 256), duration: o.duration, rate: o.rate}); err != nil {
				return err
			}
			// The control: GET /healthz (no database, no body) on the same
			// schedule, whose latencies are the machine's and the
			// generator's share of the figures above.
			if err := measure(fmt.Sprintf("control: GET /healthz, open loop, %.0f/s", o.rate),
				phase{mode: healthz, conns: max(o.conns, 256), duration: o.duration, rate: o.rate}); err != nil {
				return err
			}
		}
	}

	fmt.Printf("\n%d devices, %d local accounts each; iam serve on PostgreSQL (%s)\n", o.devices, o.accounts, pg.Describe())
	fmt.Printf("%-44s %10s %9s %9s %9s %8s %8s %8s %12s\n", "run", "check-ins", "per s", "p50 ms", "p99 ms", "serve s", "pg s", "gen s", "serve µs/op")
	for _, st := range results {
		fmt.Printf("%-44s %10d %9.0f %9.2f %9.2f %8.1f %8.1f %8.1f %12.0f\n", st.name, st.count, st.perSecond(),
			ms(st.percentile(50)), ms(st.percentile(99)), st.serveCPU.Seconds(), st.pgCPU.Seconds(), st.genCPU.Seconds(),
			float64(st.serveCPU.Microseconds())/float64(max(st.count, 1)))
	}
	fmt.Printf("(serve s, pg s, gen s: CPU seconds used by iam serve, the PostgreSQL server and this generator during the run; machine load average %s)\n", benchrun.LoadAvg())
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// installKey makes the organization the devices register into and returns
// its DeviceAgent installation key.
func installKey(ctx context.Context, dsn, encKey string) (_ string, err error) {
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer benchrun.Cleanup(&err, db.Close)
	k, err := secret.ParseKey(encKey)
	if err != nil {
		return "", err
	}
	box, err := secret.NewBox(k)
	if err != nil {
		return "", err
	}
	store := store.NewStore(db).SealBlobs(box)
	org := &identity.Organization{Name: "Agent bench"}
	if err = store.Orgs.Create(ctx, org); err != nil {
		return "", err
	}
	return store.Devices.InstallKey(ctx, org.ID, devices.AgentDevice)
}
