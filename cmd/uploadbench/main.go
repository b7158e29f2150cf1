// Command uploadbench measures what management uploads cost the API's
// memory: the peak resident set size (VmHWM) of an `iam serve` process
// that resolved one 32 MiB CSV, next to that of a fresh `iam serve` process
// that resolved ten sent at once, and their ratio.
//
//	go run ./cmd/uploadbench [-rows 5000] [-columns 64] [-concurrent 10] [-limit N] [-keep]
//
// It starts a throwaway PostgreSQL cluster with an organization of -rows
// users, a Temporal server in this process (serve's readiness needs one),
// and writes a CSV of -rows rows (one per user, by Primary Email) and
// -columns columns, its cells filled so that the file is just under the
// 32 MiB a management upload may be. Each upload is POSTed to
// /api/v1/management/actions/delete-users/uploads and must answer 201
// (resolved in the request); an upload answered 429 is sent again after its
// Retry-After, as a client does, and counted. -limit sets
// IAM_MGMT_UPLOAD_CONCURRENCY of both processes (0: the default). The
// production binary is measured, built with -tags nodev as
// deploy/Dockerfile builds it. It fails when the ratio is not under 2.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"

	"iam/cmd/internal/benchrun"
	"iam/cmd/internal/iamproc"
	"iam/models/dbtest/pgcluster"
)

func main() {
	rows := flag.Int("rows", 5000, "data rows of the CSV (and users of the organization)")
	columns := flag.Int("columns", 64, "columns of the CSV")
	concurrent := flag.Int("concurrent", 10, "uploads sent at once in the second run")
	limit := flag.Int("limit", 0, "IAM_MGMT_UPLOAD_CONCURRENCY of the serve processes (0: the default)")
	keep := flag.Bool("keep", false, "keep the work folder (the processes' logs) and say where it is")
	flag.Parse()
	if err := run(context.Background(), *rows, *columns, *concurrent, *limit, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "uploadbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rows, columns, concurrent, limit int, keep bool) (err error) {
	work, err := os.MkdirTemp("", "iam-uploadbench-")
	if err != nil {
		return err
	}
	if keep {
		defer fmt.Printf("work folder kept: %s\n", work)
	} else {
		defer benchrun.Cleanup(&err, func() error { return os.RemoveAll(work) })
	}
	if err = os.Chmod(work, 0o755); err != nil { //nolint:gosec // the PostgreSQL user must reach its folder
		return err
	}
	csvPath, size, err := writeCSV(work, rows, columns)
	if err != nil {
		return err
	}
	fmt.Printf("CSV: %d rows x %d columns, %d bytes (%.1f MiB)\n", rows, columns, size, float64(size)/(1<<20))
	bin, err := iamproc.Build(work, "iam", "nodev")
	if err != nil {
		return err
	}
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Prefix: "iam-uploadbench-pg-"})
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, pg.Stop)
	if out, createErr := pg.Command(ctx, "createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port()), "-U", "postgres", "bench").CombinedOutput(); createErr != nil {
		return fmt.Errorf("createdb: %w\n%s", createErr, out)
	}
	b, err := newBench(ctx, bin, work, pg.URL("bench").String(), rows)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, b.close)
	if limit > 0 {
		b.env = append(b.env, "IAM_MGMT_UPLOAD_CONCURRENCY="+strconv.Itoa(limit))
	}

	one, err := b.measure(ctx, csvPath, 1)
	if err != nil {
		return fmt.Errorf("one upload: %w", err)
	}
	many, err := b.measure(ctx, csvPath, concurrent)
	if err != nil {
		return fmt.Errorf("%d uploads: %w", concurrent, err)
	}
	fmt.Printf("\n%-24s %14s %14s %10s %8s %10s\n", "iam serve", "idle peak MiB", "peak MiB", "uploads", "429s", "wall s")
	for _, r := range []result{one, many} {
		fmt.Printf("%-24s %14.1f %14.1f %10d %8d %10.1f\n", fmt.Sprintf("%d upload(s) at once", r.uploads),
			mib(r.idleKB), mib(r.peakKB), r.uploads, r.refused, r.wall.Seconds())
	}
	ratio := float64(many.peakKB) / float64(one.peakKB)
	fmt.Printf("\npeak RSS of %d uploads at once / of one: %.2f (target < 2)\n", concurrent, ratio)
	if ratio >= 2 {
		return fmt.Errorf("the ratio %.2f is not under 2", ratio)
	}
	return nil
}

func mib(kb int64) float64 { return float64(kb) / 1024 }
