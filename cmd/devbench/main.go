// Command devbench measures how long `iam dev` takes to be ready:
//
//	go run ./cmd/devbench [-runs 5] [-bin PATH]
//
// It builds ./cmd/iam (the default build, the one with iam dev) unless -bin
// names a binary, then starts `iam dev` -runs times on a fresh data folder
// each (a first start: both SQLite databases and their schemas made) and
// -runs times on one folder made before (a restart), every port picked
// free, and times each start from the exec to the first 200 of /readyz
// (the API, the database and the embedded Temporal server answering),
// polled every 5 ms. It prints each start and the median of each kind, and
// the load average before and after. Issue 26's target: ready within 1 s
// of the start, the binary built.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"iam/cmd/internal/benchrun"
	"iam/cmd/internal/iamproc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "devbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("devbench", flag.ContinueOnError)
	runs := fs.Int("runs", 5, "starts of each kind (fresh data folder, restart)")
	bin := fs.String("bin", "", "the iam binary to start (default: build ./cmd/iam)")
	if err = fs.Parse(args); err != nil {
		return err
	}
	if *runs < 1 {
		return fmt.Errorf("-runs must be at least 1")
	}
	work, err := os.MkdirTemp("", "iam-devbench-")
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, func() error { return os.RemoveAll(work) })
	if *bin == "" {
		if *bin, err = iamproc.Build(work, "iam", ""); err != nil {
			return err
		}
	}
	out := benchrun.NewReport(os.Stdout)
	out.Printf("load average at the start: %s\n", benchrun.LoadAvg())
	restartDir := filepath.Join(work, "reused")
	// The folder a restart finds: made by a first start not measured.
	if _, err = startOnce(*bin, work, restartDir); err != nil {
		return err
	}
	var fresh, restart []float64
	for i := range *runs {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := startOnce(*bin, work, filepath.Join(work, "fresh-"+strconv.Itoa(i)))
		if err != nil {
			return err
		}
		fresh = append(fresh, d.Seconds())
		if d, err = startOnce(*bin, work, restartDir); err != nil {
			return err
		}
		restart = append(restart, d.Seconds())
		out.Printf("start %d: fresh data folder %.3f s, restart %.3f s\n", i+1, fresh[i], restart[i])
	}
	out.Printf("median: fresh data folder %.3f s, restart %.3f s (target ≤ 1 s); load average at the end: %s\n",
		benchrun.Median(fresh), benchrun.Median(restart), benchrun.LoadAvg())
	return out.Err()
}

// startOnce starts `iam dev` on dataDir with free ports, waits for its
// /readyz to answer 200, stops it, and returns how long the wait was from
// the exec.
func startOnce(bin, work, dataDir string) (time.Duration, error) {
	port, err := iamproc.FreePort()
	if err != nil {
		return 0, err
	}
	env := []string{
		"IAM_DATA_DIR=" + dataDir,
		"IAM_HTTP_ADDR=127.0.0.1:" + strconv.Itoa(port),
		"IAM_DEV_TEMPORAL_PORT=0",
		"IAM_DEV_UI_PORT=0",
	}
	began := time.Now()
	p, err := iamproc.Start(bin, work, "dev", env)
	if err != nil {
		return 0, err
	}
	defer p.Stop()
	if err := iamproc.WaitForEvery("http://127.0.0.1:"+strconv.Itoa(port)+"/readyz", time.Minute, 5*time.Millisecond); err != nil {
		return 0, fmt.Errorf("iam dev on %s: %w (its log is in %s)", dataDir, err, work)
	}
	return time.Since(began), nil
}
