// Command hookbench measures event hook delivery: N audit events committed
// for an organization with H hooks (each naming every event), delivered by
// one worker (the service's EventHookDelivery workflows and their
// dispatcher activities, on an in-process Temporal server) to a receiver on
// 127.0.0.1. It prints deliveries/s (all deliveries over the time from the
// first commit to the last delivery's first attempt) and the p50/p99 of
// commit to first attempt, for two receivers:
//
//   - instant: answers 200 at once; the events are committed -per-tx a
//     transaction as fast as the database takes them (a burst: the
//     figures are the service's rate), then paced at -rate events/s (the
//     latency at that rate);
//   - slow: takes -slow (50 ms) per request; -slow-n events, with
//     -slow-conc requests in flight per hook (IAM_EVENT_HOOKS_CONCURRENCY):
//     its bound is hooks × conc / latency.
//
// Usage: go run ./cmd/hookbench [-n 10000] [-hooks 3] [-rate 400] [-slow 50ms] [-slow-n 1000] [-slow-conc 32] [-only postgres|sqlite]
//
// PostgreSQL runs in a throwaway cluster (or IAM_BENCH_DATABASE_URL,
// migrated first); SQLite in a temporary file. Both run unless -only names
// one.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/temporaltest"

	"iam/cmd/internal/benchrun"
	"iam/models"
	"iam/models/dbtest/pgcluster"
	"iam/models/hooks"
	"iam/models/identity"
	"iam/models/secret"
	"iam/models/sqldb"
	modelstore "iam/models/store"
	"iam/worker"
	"iam/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "hookbench:", err)
		os.Exit(1)
	}
}

type config struct {
	n, hooks, perTx, rate int
	slow                  time.Duration
	slowN, slowConc       int
	only                  string
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) (err error) {
	out := benchrun.NewReport(stdout)
	defer benchrun.Cleanup(&err, out.Err)
	var cfg config
	flags := flag.NewFlagSet("hookbench", flag.ContinueOnError)
	flags.IntVar(&cfg.n, "n", 10000, "events of the instant receiver's runs")
	flags.IntVar(&cfg.hooks, "hooks", 3, "hooks, each receiving every event")
	flags.IntVar(&cfg.perTx, "per-tx", 20, "events a transaction (burst)")
	flags.IntVar(&cfg.rate, "rate", 400, "events a second of the paced run (0 skips it)")
	flags.DurationVar(&cfg.slow, "slow", 50*time.Millisecond, "time the slow receiver takes per request (0 skips it)")
	flags.IntVar(&cfg.slowN, "slow-n", 1000, "events of the slow receiver's run")
	flags.IntVar(&cfg.slowConc, "slow-conc", 32, "requests in flight per hook against the slow receiver")
	flags.StringVar(&cfg.only, "only", "", "postgres or sqlite: run one database only")
	if err = flags.Parse(args); err != nil {
		return err
	}
	ts := temporaltest.NewServer()
	defer ts.Stop()
	tc := ts.GetDefaultClient()
	if err = worker.EnsureSearchAttributes(ctx, tc, ts.GetDefaultNamespace()); err != nil {
		return err
	}
	if cfg.only == "" || cfg.only == "postgres" {
		dsn, stopPG, startErr := benchrun.Postgres(ctx, getenv, pgcluster.Options{Prefix: "iam-hookbench-pg-"}, out)
		if startErr != nil {
			return startErr
		}
		defer benchrun.Cleanup(&err, stopPG)
		if err = bench(ctx, out, tc, cfg, "PostgreSQL", dsn); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
	}
	if cfg.only == "" || cfg.only == "sqlite" {
		dir, tmpErr := os.MkdirTemp("", "iam-hookbench-")
		if tmpErr != nil {
			return tmpErr
		}
		defer benchrun.Cleanup(&err, func() error { return os.RemoveAll(dir) })
		if err = bench(ctx, out, tc, cfg, "SQLite", "sqlite:"+filepath.Join(dir, "iam.db")); err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
	}
	return nil
}

// receiver counts first attempts: when each webhook-id first arrived, and
// the commit time its body carries (the event's published time, taken
// just before its transaction commits).
type receiver struct {
	mu    sync.Mutex
	delay time.Duration
	first map[string]time.Duration // webhook-id → commit to first attempt
	last  time.Time
	want  int
	done  chan struct{}
}

func newReceiver(delay time.Duration) *receiver {
	return &receiver{delay: delay, first: map[string]time.Duration{}, done: make(chan struct{})}
}

func (r *receiver) expect(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.first, r.want, r.done = map[string]time.Duration{}, n, make(chan struct{})
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(req.Body)
	var p struct {
		Data struct {
			Published time.Time `json:"published"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &p)
	if r.delay > 0 {
		time.Sleep(r.delay)
	}
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	if _, seen := r.first[id]; !seen && !p.Data.Published.IsZero() {
		r.first[id] = now.Sub(p.Data.Published)
		r.last = now
		if len(r.first) == r.want {
			close(r.done)
		}
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (r *receiver) wait(ctx context.Context, timeout time.Duration) ([]time.Duration, time.Time, error) {
	select {
	case <-r.done:
	case <-time.After(timeout):
	case <-ctx.Done():
		return nil, time.Time{}, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	lat := make([]time.Duration, 0, len(r.first))
	for _, d := range r.first {
		lat = append(lat, d)
	}
	slices.Sort(lat)
	if len(lat) < r.want {
		return lat, r.last, fmt.Errorf("%d of %d deliveries arrived within %v", len(lat), r.want, timeout)
	}
	return lat, r.last, nil
}

// bench runs the shapes on one database.
func bench(ctx context.Context, out *benchrun.Report, tc client.Client, cfg config, database, dsn string) (err error) {
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, db.Close)
	if _, err = sqldb.MigrateUp(ctx, db); err != nil {
		return err
	}
	box, err := secret.NewBox(make([]byte, secret.KeySize))
	if err != nil {
		return err
	}
	store := modelstore.NewStore(db).SealBlobs(box)
	store.Hooks.SetURLPolicy(hooks.URLPolicy{AllowHTTP: true})

	sh := shapeRun{ctx: ctx, out: out, tc: tc, store: store, db: db, cfg: cfg, database: database}
	if err = sh.run("instant receiver, burst", newReceiver(0), 1, cfg.n, 0); err != nil {
		return err
	}
	if cfg.rate > 0 {
		if err = sh.run(fmt.Sprintf("instant receiver, paced at %d events/s", cfg.rate), newReceiver(0), 1, cfg.n, cfg.rate); err != nil {
			return err
		}
	}
	if cfg.slow > 0 {
		if err = sh.run(fmt.Sprintf("receiver taking %v, bound %d hooks × %d / %v = %.0f deliveries/s", cfg.slow, cfg.hooks, cfg.slowConc, cfg.slow,
			float64(cfg.hooks*cfg.slowConc)/cfg.slow.Seconds()), newReceiver(cfg.slow), cfg.slowConc, cfg.slowN, 0); err != nil {
			return err
		}
	}
	return nil
}

// write commits n user.updated events of org, perTx a transaction; with
// pace > 0, pace a second: a transaction every 10 ms of pace/100 events.
func write(ctx context.Context, db *bun.DB, orgID int64, n, perTx, pace int) error {
	o := models.Origin{Actor: models.Actor{Type: models.ActorUser, ID: "1", DisplayName: "bench"}, RequestID: "hookbench"}
	ctx = models.WithOrigin(ctx, o)
	var tick *time.Ticker
	if pace > 0 {
		perTx = max(1, pace/100)
		tick = time.NewTicker(time.Second * time.Duration(perTx) / time.Duration(pace))
		defer tick.Stop()
	}
	for i := 0; i < n; i += perTx {
		if tick != nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		err := sqldb.InTx(ctx, db, func(ctx context.Context, _ bun.Tx) error {
			for j := i; j < min(i+perTx, n); j++ {
				if err := models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: "user.updated", Targets: []models.EventTarget{{
					Type: "user", ID: fmt.Sprint(1000 + j), DisplayName: fmt.Sprintf("user%d@example.com", j),
					Changes: []models.FieldChange{{Field: "title", Old: "Engineer", New: "Lead engineer"}}}}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return errors.Join(fmt.Errorf("write events: %w", err))
		}
	}
	return nil
}

// shapeRun runs the shapes of one database.
type shapeRun struct {
	ctx      context.Context
	out      *benchrun.Report
	tc       client.Client
	store    *modelstore.Store
	db       *bun.DB
	cfg      config
	database string
}

// run delivers n events (pace a second, 0: a burst) to the hooks of a new
// organization, served by a new worker with conc requests in flight per
// hook, to rcv, and prints the figures.
func (sh shapeRun) run(name string, rcv *receiver, conc, n int, pace int) error {
	ctx, out, tc, store, db, cfg, database := sh.ctx, sh.out, sh.tc, sh.store, sh.db, sh.cfg, sh.database
	queue := fmt.Sprintf("hookbench-%d", sqldb.NewID())
	w := worker.NewOn(tc, queue, worker.Deps{Store: store, EventHookConcurrency: conc,
		EventHookAllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	org := &identity.Organization{Name: "hookbench " + name}
	if err := store.Orgs.Create(ctx, org); err != nil {
		return err
	}
	var ids []int64
	for i := 0; i < cfg.hooks; i++ {
		h := &hooks.Hook{OrgID: org.ID, URL: fmt.Sprintf("%s/hook/%d", srv.URL, i), EventTypes: []string{"*"}, Enabled: true}
		if _, err := store.Hooks.Create(ctx, h); err != nil {
			return err
		}
		ids = append(ids, h.ID)
		if _, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.EventHookWorkflowID(h.ID), TaskQueue: queue},
			workflows.EventHookWorkflowName, workflows.EventHookInput{HookID: h.ID, OrgID: org.ID}); err != nil {
			return err
		}
	}
	defer func() {
		off := false
		for _, id := range ids {
			_, _ = store.Hooks.Update(context.Background(), org.ID, id, hooks.HookChange{Enabled: &off})
		}
	}()
	// The hooks' own creation events (each hook receives those of the
	// hooks made after it): let them go first.
	if warm := cfg.hooks * (cfg.hooks - 1) / 2; warm > 0 {
		rcv.expect(warm)
		if _, _, err := rcv.wait(ctx, time.Minute); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	want := n * cfg.hooks
	rcv.expect(want)
	out.Printf("[%s] %s: %d events to %d hooks (%d deliveries), %d in flight per hook (load average %s) ...\n",
		database, name, n, cfg.hooks, want, conc, benchrun.LoadAvg())
	start := time.Now()
	if err := write(ctx, db, org.ID, n, cfg.perTx, pace); err != nil {
		return err
	}
	wrote := time.Since(start)
	lat, last, err := rcv.wait(ctx, 10*time.Minute)
	if err != nil {
		return err
	}
	took := last.Sub(start)
	out.Printf("  committed in %.2f s (%.0f events/s); delivered in %.2f s: %.0f deliveries/s; commit to first attempt p50 %v, p99 %v, max %v\n",
		wrote.Seconds(), float64(n)/wrote.Seconds(), took.Seconds(), float64(want)/took.Seconds(),
		benchrun.Percentile(lat, 50).Round(time.Millisecond), benchrun.Percentile(lat, 99).Round(time.Millisecond),
		lat[len(lat)-1].Round(time.Millisecond))
	return nil
}
