// Command mgmtbench measures management executions on PostgreSQL, in one
// run:
//
//	go run ./cmd/mgmtbench [-users 100000] [-only move|delete] [-turns 3] [-statements N]
//
// It seeds two organizations alike with N users each (COPY), every user in a
// static and a dynamic group, with an enrollment, an access and a refresh
// token, and every 100th linked to a device's local account. Then, on the
// first organization through the HTTP API (the API, a worker and a Temporal
// server in this process; execute with a filter naming the users, then the
// status route polled until the execution has finished), and on the second
// with plain set-based SQL in one transaction, it times:
//
//   - moving the users to another container, next to one plain UPDATE, by
//     turns (-turns, each to another container; the means are compared);
//   - deleting them, next to a plain DELETE with the same cascades (group
//     memberships and group counts, enrollments and tokens through the
//     foreign keys, the device accounts unlinked with their history rows and
//     unlink commands, the devices' counts).
//
// It prints wall seconds, users per second and the ratio of each pair, and
// checks that both organizations end alike (no user, membership,
// enrollment, token or linked account left).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"iam/cmd/internal/benchrun"
	"iam/models/dbtest/pgcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	users := flag.Int("users", 100_000, "users of each organization")
	only := flag.String("only", "", "run one pair only: move or delete")
	turns := flag.Int("turns", 3, "moves of the users, each through the API and plainly by turns")
	statements := flag.Int("statements", 0, "print the N statements of each API run that took the most database time (pg_stat_statements)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of each API run to `PREFIX`-<action>.pprof")
	flag.Parse()
	if err := run(ctx, *users, *only, *turns, *statements, *cpuProfile); err != nil {
		fmt.Fprintln(os.Stderr, "mgmtbench:", err)
		os.Exit(1)
	}
}

// benchPGConfig gives the benchmark's cluster room for the seeded rows.
const benchPGConfig = `
shared_buffers = 256MB
max_wal_size = 2GB
` + benchrun.StatementsConfig

func run(ctx context.Context, users int, only string, turns, statements int, cpuProfile string) (err error) {
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Config: benchPGConfig, Prefix: "iam-mgmtbench-pg-"})
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, pg.Stop)
	fmt.Printf("throwaway PostgreSQL cluster %s\n", pg.Describe())
	work, err := os.MkdirTemp("", "iam-mgmtbench-")
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, func() error { return os.RemoveAll(work) })
	b, err := newBench(ctx, pg.URL("postgres").String(), work, users)
	if err != nil {
		return err
	}
	b.statements, b.cpuProfile = statements, cpuProfile
	defer benchrun.Cleanup(&err, b.close)
	if err = b.seed(ctx); err != nil {
		return err
	}
	var rows []pair
	if only == "" || only == "move" {
		p, err := b.move(ctx, max(turns, 1))
		if err != nil {
			return err
		}
		rows = append(rows, p)
	}
	if only == "" || only == "delete" {
		p, err := b.delete(ctx)
		if err != nil {
			return err
		}
		rows = append(rows, p)
	}
	fmt.Printf("\n%-8s %8s %10s %12s %10s %12s %8s\n", "action", "users", "API s", "API users/s", "plain s", "plain users/s", "ratio")
	for _, p := range rows {
		fmt.Printf("%-8s %8d %10.2f %12.0f %10.2f %12.0f %8.2f\n", p.name, users, p.api.Seconds(), float64(users)/p.api.Seconds(),
			p.plain.Seconds(), float64(users)/p.plain.Seconds(), p.api.Seconds()/p.plain.Seconds())
		fmt.Printf("  %s\n", p.note)
	}
	return nil
}
