// Command crudbench measures what the audit log costs the ordinary writes:
// the mixed CRUD load of users and groups on PostgreSQL, through two builds
// of `iam serve` in the same run, "after" (this build) against "before"
// (the build before the audit log), and prints the ratios:
//
//	go run ./cmd/crudbench [-before BIN] [-after BIN] [-before-rev REV] [-clients 32] [-duration 20s] [-turns 3] [-statements N]
//
// Without -after it builds ./cmd/iam from the working tree; without -before
// it builds the commit -before-rev names (by default the parent of the
// commit that added models/sqldb/audit.go, the audit log's core) in a
// temporary git worktree, removed after. Both are production builds
// (`-tags nodev`, as deploy/Dockerfile builds the image).
//
// Each turn runs both builds one after the other (which goes first
// alternates from turn to turn), each as an `iam serve` process on a fresh
// database of one throwaway PostgreSQL cluster, migrated by that build
// (`iam migrate up`). Each is seeded alike through its API (-users users,
// -groups static groups with a few members each), warmed up, and then
// -clients clients in a closed loop (each sends its next request when the
// previous one is answered) run a fixed mix for -duration: create a user
// (20%), PATCH one (30%), GET /users?limit=100 (20%), add a user to a
// group or remove the one it added (20%, in turn), delete a user (10%).
// Each client changes only users it owns (seeded for it or created by it),
// so that every request must succeed: any answer but the expected 2xx
// fails the run.
//
// It prints, for every turn and as the median over turns, requests/s, p50
// and p99 of each build, the ratios after/before of throughput (target
// ≥ 0.90) and of p99 (target ≤ 1.2), and the CPU time per request of each
// `iam serve` process and of the PostgreSQL server (postmaster and
// backends), from /proc; and the load average at the start and the end.
// -statements N adds, per run, the statements per request and the N
// statements that took the most database time (pg_stat_statements).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"iam/cmd/internal/benchrun"
	"iam/cmd/internal/iamproc"
	"iam/models/dbtest/pgcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "crudbench:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	before, after, beforeRev string
	clients, turns           int
	duration, warmup, poll   time.Duration
	users, groups            int
	mix                      mix
	statements               int
	logLevel                 string
	keep                     bool
}

// The targets of issue 23: after/before.
const (
	throughputTarget = 0.90 // at least
	p99Target        = 1.2  // at most
)

// auditCore is the file whose first commit brought the audit log: the
// build before it is the one compared with by default.
const auditCore = "models/sqldb/audit.go"

func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	out := benchrun.NewReport(stdout)
	defer benchrun.Cleanup(&err, out.Err) // a report cut short fails the run
	fs := flag.NewFlagSet("crudbench", flag.ContinueOnError)
	var cfg config
	fs.StringVar(&cfg.before, "before", "", "iam binary of the build compared with (default: built from -before-rev)")
	fs.StringVar(&cfg.after, "after", "", "iam binary of the build measured (default: built from the working tree)")
	fs.StringVar(&cfg.beforeRev, "before-rev", "", "commit to build -before from (default: the parent of the first commit of "+auditCore+")")
	fs.IntVar(&cfg.clients, "clients", 32, "clients in a closed loop")
	fs.DurationVar(&cfg.duration, "duration", 20*time.Second, "measured time of each build in each turn")
	fs.DurationVar(&cfg.warmup, "warmup", 3*time.Second, "unmeasured load before each measured run")
	fs.DurationVar(&cfg.poll, "poll", time.Second, "how often a reader of the audit log polls it during the measured run, as a SIEM or an event hook's dispatcher does (each poll numbers the events committed since the last); 0: no reader")
	fs.IntVar(&cfg.turns, "turns", 3, "turns, each running both builds (in alternating order)")
	fs.IntVar(&cfg.users, "users", 2000, "users seeded through the API before each run")
	fs.IntVar(&cfg.groups, "groups", 50, "static groups seeded through the API before each run")
	mixText := fs.String("mix", "20,30,20,20,10", "percentages of create, patch, list, group member (add or remove), delete")
	fs.IntVar(&cfg.statements, "statements", 0, "print the statements per request and the N statements of each run that took the most database time (pg_stat_statements)")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "IAM_LOG_LEVEL of iam serve (info is what a deployment runs with)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the work folder (binaries, the services' logs) and say where it is")
	if err = fs.Parse(args); err != nil {
		return err
	}
	if cfg.mix, err = parseMix(*mixText); err != nil {
		return err
	}
	if cfg.clients < 1 || cfg.turns < 1 || cfg.duration <= 0 || cfg.groups < 1 || cfg.users < cfg.clients {
		return fmt.Errorf("-clients, -turns, -duration and -groups must be positive, -users at least -clients")
	}

	work, err := os.MkdirTemp("", "iam-crudbench-")
	if err != nil {
		return err
	}
	if cfg.keep {
		defer out.Printf("work folder kept: %s\n", work)
	} else {
		defer benchrun.Cleanup(&err, func() error { return os.RemoveAll(work) })
	}
	if err = os.Chmod(work, 0o755); err != nil { //nolint:gosec // the PostgreSQL user must reach its folder
		return err
	}
	builds, err := binaries(cfg, work, out)
	if err != nil {
		return err
	}

	pgConfig := benchPGConfig
	if cfg.statements > 0 {
		pgConfig += benchrun.StatementsConfig
	}
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Config: pgConfig, Prefix: "iam-crudbench-pg-"})
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, pg.Stop)
	out.Printf("throwaway PostgreSQL cluster %s\n", pg.Describe())

	b := &bench{cfg: cfg, pg: pg, work: work, out: out}
	loadStart := benchrun.LoadAvg()
	out.Printf("load average at the start: %s\n", loadStart)
	var turns []turn
	for t := range cfg.turns {
		order := []*build{builds[0], builds[1]}
		if t%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		var tr turn
		for _, bd := range order {
			if err = ctx.Err(); err != nil {
				return err
			}
			res, runErr := b.measure(ctx, bd, t)
			if runErr != nil {
				return fmt.Errorf("turn %d, %s: %w", t+1, bd.name, runErr)
			}
			if bd == builds[0] {
				tr.before = res
			} else {
				tr.after = res
			}
		}
		turns = append(turns, tr)
		out.Printf("turn %d: %s\n", t+1, tr.ratios())
	}
	loadEnd := benchrun.LoadAvg()
	out.Printf("load average at the end: %s\n\n", loadEnd)
	report(out, cfg, builds, turns, loadStart, loadEnd)
	return nil
}

// benchPGConfig is a production-like cluster for a write-heavy load:
// autovacuum on (the test default turns it off), room for the rows.
const benchPGConfig = `
shared_buffers = 128MB
autovacuum = on
max_wal_size = 1GB
`

// build is one iam binary compared.
type build struct {
	name string // "before" or "after"
	bin  string
	from string // where it came from, for the report
}

// binaries returns the builds compared, before and after, building those
// the command line does not give.
func binaries(cfg config, work string, out *benchrun.Report) ([]*build, error) {
	before := &build{name: "before", bin: cfg.before, from: cfg.before}
	after := &build{name: "after", bin: cfg.after, from: cfg.after}
	if after.bin == "" {
		bin, err := iamproc.Build(work, "iam-after", "nodev")
		if err != nil {
			return nil, err
		}
		after.bin, after.from = bin, "the working tree"
		if head, err := gitOutput("rev-parse", "--short", "HEAD"); err == nil {
			after.from += " (HEAD " + head + ")"
		}
	}
	if before.bin == "" {
		rev := cfg.beforeRev
		if rev == "" {
			first, err := gitOutput("log", "--diff-filter=A", "--format=%H", "--", auditCore)
			if err != nil {
				return nil, err
			}
			lines := strings.Fields(first)
			if len(lines) == 0 {
				return nil, fmt.Errorf("no commit added %s: give -before or -before-rev", auditCore)
			}
			rev = lines[len(lines)-1] + "^" // the oldest, should the file have been added again
		}
		full, err := gitOutput("rev-parse", "--short", rev)
		if err != nil {
			return nil, err
		}
		bin, err := iamproc.BuildRevision(full, work, "iam-before", "nodev")
		if err != nil {
			return nil, err
		}
		before.bin, before.from = bin, "commit "+full
	}
	for _, bd := range []*build{before, after} {
		abs, err := filepath.Abs(bd.bin)
		if err != nil {
			return nil, err
		}
		bd.bin = abs
		out.Printf("%-6s %s (%s)\n", bd.name, bd.bin, bd.from)
	}
	return []*build{before, after}, nil
}

// gitOutput runs git with args and returns its output, trimmed.
func gitOutput(args ...string) (string, error) {
	o, err := exec.Command("git", args...).Output() //nolint:gosec // git, asked for the commits the benchmark builds
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(o)), nil
}
