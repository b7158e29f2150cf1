// Command usersbench measures the users list and dynamic group recompute on
// PostgreSQL with 1,000,000 users, in one run:
//
//	go run ./api/usersbench [-users 1000000] [-duration 15s] [-concurrency 32]
//
// It seeds the users with COPY into a throwaway PostgreSQL cluster (the
// installed server binaries, as the dbtest package finds them) or into the
// database IAM_BENCH_DATABASE_URL names (migrated first; the rows stay), and
// prints:
//
//   - GET /users?limit=100 paging through next_cursor at the given
//     concurrency, through the whole HTTP API (gin, token check, JSON), next
//     to the same SQL statements (the count and the keyset page) run directly
//     on the same database;
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
	"time"
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
	cpuProfile  string // written during the API run of (a)
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("usersbench", flag.ContinueOnError)
	var cfg config
	fs.IntVar(&cfg.users, "users", 1_000_000, "users to seed")
	fs.DurationVar(&cfg.duration, "duration", 15*time.Second, "length of each load run")
	fs.IntVar(&cfg.concurrency, "concurrency", 32, "concurrent clients")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the API run of (a) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dsn := getenv("IAM_BENCH_DATABASE_URL")
	if dsn == "" {
		c, err := startCluster(ctx)
		if err != nil {
			return err
		}
		defer c.stop()
		dsn = c.url()
		fmt.Fprintf(out, "throwaway PostgreSQL cluster from %s on port %d\n", c.bin, c.port)
	}
	b, err := newBench(ctx, dsn, cfg, out)
	if err != nil {
		return err
	}
	defer b.close()
	if err := b.seed(ctx); err != nil {
		return err
	}
	if err := b.listThroughput(ctx); err != nil {
		return err
	}
	if err := b.filteredList(ctx); err != nil {
		return err
	}
	return b.recompute(ctx)
}
