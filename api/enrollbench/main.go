// Command enrollbench measures quick enrollment end to end: it uploads a
// generated CSV of N rows (1,000,000 by default) through the HTTP API of an
// `iam dev` subprocess and waits for the job to complete, then times a bulk
// load (PostgreSQL COPY; on SQLite one prepared insert in one transaction)
// of the same rows into the enrollment table, and prints wall seconds, rows
// per second, their ratio and the server's peak RSS (VmHWM) during the
// upload. It runs twice: on a throwaway PostgreSQL cluster and on the
// embedded default (SQLite).
//
//	go run ./api/enrollbench [-rows 1000000] [-only postgres|sqlite]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func main() {
	rows := flag.Int("rows", 1_000_000, "rows of the generated CSV")
	only := flag.String("only", "", "run one mode only: postgres or sqlite")
	flag.Parse()
	if err := run(context.Background(), *rows, *only); err != nil {
		fmt.Fprintln(os.Stderr, "enrollbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rows int, only string) error {
	work, err := os.MkdirTemp("", "iam-enrollbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := os.Chmod(work, 0o755); err != nil { // the PostgreSQL user must reach its folder
		return err
	}
	bin := filepath.Join(work, "iam")
	fmt.Printf("building iam ...\n")
	if out, err := command("go", "build", "-o", bin, "./cmd/iam").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	csvPath := filepath.Join(work, "users.csv")
	if err := writeCSV(csvPath, rows); err != nil {
		return err
	}
	var results []result
	if only == "" || only == "postgres" {
		pg, err := startPostgres(ctx, filepath.Join(work, "pg"))
		if err != nil {
			return err
		}
		r, err := measure(ctx, bin, work, csvPath, rows, pg.url("bench"), pg)
		pg.stop()
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		results = append(results, r)
	}
	if only == "" || only == "sqlite" {
		r, err := measure(ctx, bin, work, csvPath, rows, "", nil)
		if err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
		results = append(results, r)
	}
	fmt.Printf("\n%-26s %10s %12s %12s %12s %8s %14s\n", "database", "rows", "job s", "job rows/s", "bulk load s", "ratio", "peak RSS MiB")
	for _, r := range results {
		fmt.Printf("%-26s %10d %12.1f %12.0f %12.1f %8.2f %14.1f\n", r.mode, rows, r.job.Seconds(), float64(rows)/r.job.Seconds(),
			r.load.Seconds(), r.job.Seconds()/r.load.Seconds(), float64(r.peakKB)/1024)
		fmt.Printf("  upload %.1f s; bulk load %.0f rows/s (%s); server peak RSS after the upload %.1f MiB, at the end %.1f MiB\n",
			r.upload.Seconds(), float64(rows)/r.load.Seconds(), r.loadKind, float64(r.peakKB)/1024, float64(r.endKB)/1024)
	}
	return nil
}

type result struct {
	mode, loadKind    string
	upload, job, load time.Duration
	peakKB, endKB     int64
}
