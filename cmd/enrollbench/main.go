// Command enrollbench measures quick enrollment end to end: it uploads a
// generated CSV of N rows (1,000,000 by default) through the HTTP API and
// waits for the job to complete, then times a bulk load (PostgreSQL COPY; on
// SQLite one prepared insert in one transaction) of what the job must write
// at the least: the same rows into the emptied enrollment table, then a
// result row per CSV row into the emptied job results. It prints wall
// seconds, rows per second, the job's time over the bulk load's (and over
// the enrollment rows' load alone, the ratio of earlier rounds) and the
// API's peak RSS (VmHWM) during the upload.
//
// It runs twice: on a throwaway PostgreSQL cluster in the production shape
// (`iam serve` and `iam worker` processes of the production binary, built
// with -tags nodev as deploy/Dockerfile builds it, a Temporal server in this
// process), and on the embedded default (`iam dev` on SQLite, one process
// holding the API, a worker and the Temporal server, so its RSS covers all
// three).
//
//	go run ./cmd/enrollbench [-rows 1000000] [-only postgres|sqlite] [-chunk-rows N] [-keep]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"iam/cmd/internal/benchrun"
	"iam/cmd/internal/iamproc"
	"iam/models/dbtest/pgcluster"
)

func main() {
	rows := flag.Int("rows", 1_000_000, "rows of the generated CSV")
	only := flag.String("only", "", "run one mode only: postgres or sqlite")
	chunkRows := flag.Int("chunk-rows", 0, "chunk_rows of the upload (0: the service's default)")
	keep := flag.Bool("keep", false, "keep the work folder (the processes' logs) and say where it is")
	flag.Parse()
	if err := run(context.Background(), *rows, *chunkRows, *only, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "enrollbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rows, chunkRows int, only string, keep bool) (err error) {
	work, err := os.MkdirTemp("", "iam-enrollbench-")
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
	csvPath := filepath.Join(work, "users.csv")
	if err = writeCSV(csvPath, rows); err != nil {
		return err
	}
	var results []result
	if only == "" || only == "postgres" {
		// The production binary, as deploy/Dockerfile builds it: no
		// embedded Temporal server (-tags nodev).
		bin, err := iamproc.Build(work, "iam", "nodev")
		if err != nil {
			return err
		}
		pg, err := startPostgres(ctx)
		if err != nil {
			return err
		}
		r, err := measure(ctx, bin, work, csvPath, rows, chunkRows, pg.URL("bench").String())
		if err = errors.Join(err, pg.Stop()); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		results = append(results, r)
	}
	if only == "" || only == "sqlite" {
		bin, err := iamproc.Build(work, "iam-dev", "")
		if err != nil {
			return err
		}
		r, err := measure(ctx, bin, work, csvPath, rows, chunkRows, "")
		if err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
		results = append(results, r)
	}
	fmt.Printf("\n%-28s %10s %10s %12s %12s %8s %14s\n", "database", "rows", "job s", "job rows/s", "bulk load s", "ratio", "API peak MiB")
	for _, r := range results {
		load := r.loadEnroll + r.loadResults
		fmt.Printf("%-28s %10d %10.1f %12.0f %12.1f %8.2f %14.1f\n", r.mode, rows, r.job.Seconds(), float64(rows)/r.job.Seconds(),
			load.Seconds(), r.job.Seconds()/load.Seconds(), float64(r.peakKB)/1024)
		fmt.Printf("  upload %.1f s; bulk load (%s) %.1f s of enrollment rows + %.1f s of result rows; the job over the enrollment rows' load alone %.2f\n",
			r.upload.Seconds(), r.loadKind, r.loadEnroll.Seconds(), r.loadResults.Seconds(), r.job.Seconds()/r.loadEnroll.Seconds())
		if r.workerKB == 0 {
			fmt.Printf("  iam dev (API, worker and Temporal server in one process): peak RSS %.1f MiB after the upload, %.1f MiB at the end; CPU %.1f s\n",
				float64(r.peakKB)/1024, float64(r.endKB)/1024, r.apiCPU.Seconds())
		} else {
			fmt.Printf("  iam serve: peak RSS %.1f MiB after the upload, %.1f MiB at the end, CPU %.1f s; iam worker: peak RSS %.1f MiB, CPU %.1f s\n",
				float64(r.peakKB)/1024, float64(r.endKB)/1024, r.apiCPU.Seconds(), float64(r.workerKB)/1024, r.workerCPU.Seconds())
		}
		fmt.Printf("  API memory before the upload: %s\n  API memory at the end: %s\n", r.idle, r.end)
	}
	return nil
}

type result struct {
	mode, loadKind          string
	upload, job             time.Duration
	loadEnroll, loadResults time.Duration // the bulk loads of the enrollment and the result rows
	peakKB, endKB, workerKB int64
	apiCPU, workerCPU       time.Duration
	idle, end               string // the API's memory before the upload and at the end
}

// benchPGConfig gives the benchmark's cluster room for a million-row load.
const benchPGConfig = `
shared_buffers = 256MB
max_wal_size = 1GB
`

// startPostgres starts a throwaway cluster with a "bench" database.
func startPostgres(ctx context.Context) (*pgcluster.Cluster, error) {
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Config: benchPGConfig, Prefix: "iam-enrollbench-pg-"})
	if err != nil {
		return nil, err
	}
	if out, err := pg.Command(ctx, "createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port()), "-U", "postgres", "bench").CombinedOutput(); err != nil {
		return nil, errors.Join(fmt.Errorf("createdb: %w\n%s", err, out), pg.Stop())
	}
	return pg, nil
}
