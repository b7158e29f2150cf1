// Command usersbench measures the users list and dynamic group recompute on
// PostgreSQL with 1,000,000 users, in one run:
//
//	go run ./cmd/usersbench [-users 1000000] [-duration 15s] [-concurrency 32] [-turns 5] [-parts abc] [-cpuprofile file]
//
// It seeds the users with COPY into a throwaway PostgreSQL cluster (the
// installed server binaries, as the dbtest package finds them) or into the
// database IAM_BENCH_DATABASE_URL names (migrated first; the rows stay), and
// prints:
//
//   - GET /users?limit=100 paging through next_cursor at the given
//     concurrency, through the whole HTTP API (gin, token check, JSON), next
//     to the same SQL statements (the count and the keyset page) run directly
//     on the same database, and through the store without HTTP; the runs
//     compared take turns (-turns), so that the other load of a shared
//     machine weighs on each alike;
//   - the same for a filtered list (department eq "Dept-07" and status eq 1),
//     with the EXPLAIN ANALYZE of its statements;
//   - the recompute of a dynamic group over every user, in the batches the
//     recompute job runs, next to one plain INSERT … SELECT of the same
//     membership.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"iam/cmd/internal/benchrun"
	"iam/models/dbtest/pgcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "usersbench:", err)
		os.Exit(1)
	}
}

type config struct {
	users       int
	duration    time.Duration
	concurrency int
	turns       int    // turns each load run is interleaved in
	cpuProfile  string // written during the API runs of (a); .sql and .store: the other runs
	parts       string // which of (a), (b) and (c) to run
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) (err error) {
	out := benchrun.NewReport(stdout)
	defer benchrun.Cleanup(&err, out.Err) // a report cut short fails the run
	fs := flag.NewFlagSet("usersbench", flag.ContinueOnError)
	var cfg config
	fs.IntVar(&cfg.users, "users", 1_000_000, "users to seed")
	fs.DurationVar(&cfg.duration, "duration", 15*time.Second, "length of each load run")
	fs.IntVar(&cfg.concurrency, "concurrency", 32, "concurrent clients")
	fs.IntVar(&cfg.turns, "turns", 5, "turns the runs compared take, in alternation, each for duration/turns")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write CPU profiles of the API runs of (a) to this file name with .<turn> added, of its direct SQL and store runs with .sql.<turn> and .store.<turn> (go tool pprof merges the files it is given)")
	fs.StringVar(&cfg.parts, "parts", "abc", "the measurements to run: a (list), b (filtered list), c (recompute)")
	if err = fs.Parse(args); err != nil {
		return err
	}
	dsn, stopPG, err := benchrun.Postgres(ctx, getenv, pgcluster.Options{Config: benchPGConfig, Prefix: "iam-usersbench-pg-"}, out)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, stopPG)
	b, err := newBench(ctx, dsn, cfg, out)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, b.close)
	if err = b.seed(ctx); err != nil {
		return err
	}
	for _, part := range []struct {
		name string
		run  func(context.Context) error
	}{{"a", b.listThroughput}, {"b", b.filteredList}, {"c", b.recompute}} {
		if !strings.Contains(cfg.parts, part.name) {
			continue
		}
		if err = part.run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// benchPGConfig gives the benchmark's cluster the memory to hold a million
// users and room for its clients.
const benchPGConfig = `
shared_buffers = 1GB
max_wal_size = 4GB
`
