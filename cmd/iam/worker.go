package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"iam/models/hooks"
	"iam/models/store"
	"iam/worker"
)

func workerCommand(environ []string, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run a Temporal worker for the service's workflows",
		Long: "worker polls the service's task queue on the Temporal frontend " +
			"(IAM_TEMPORAL_ADDRESS) and runs workflows and activities against " +
			"IAM_DATABASE_URL. Several may run at once.",
		Args: cobra.NoArgs,
		RunE: configured(environ, func(cmd *cobra.Command, cfg Config) error {
			if err := cfg.requireDatabase(); err != nil {
				return err
			}
			return runWorker(cmd.Context(), cfg, newLogger(stderr, cfg.LogLevel))
		}),
	}
}

func runWorker(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	secrets, err := enrollmentSecrets(cfg, "")
	if err != nil {
		return err
	}
	signer, err := auditSigner(cfg, "")
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg.DatabaseURL, false, log)
	if err != nil {
		return err
	}
	defer joinClose(&err, store.Close)
	store.SealBlobs(secrets)
	store.Hooks.SetURLPolicy(hooks.URLPolicy{AllowHTTP: cfg.EventHooksAllowHTTP})
	opts, tr, err := tracedTemporalOptions(ctx, cfg, "iam-worker", log)
	if err != nil {
		return err
	}
	defer tr.Shutdown()
	// The job metrics reach /metrics of the health listener.
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts.MetricsHandler = worker.NewMetricsHandler(metrics)
	tc, err := dialTemporal(ctx, opts, log)
	if err != nil {
		return err
	}
	defer tc.Close()
	if err = worker.EnsureSearchAttributes(ctx, tc, cfg.Temporal.Namespace); err != nil {
		return err
	}
	if err = worker.EnsureAuditSchedules(ctx, tc, cfg.AuditDigestInterval); err != nil {
		return err
	}
	if err = worker.EnsureEventHookSchedule(ctx, tc); err != nil {
		return err
	}
	w := worker.New(tc, worker.Deps{Store: store, Secrets: secrets, MgmtExecutionTimeout: cfg.MgmtExecutionTimeout,
		AuditSigner: signer, AuditRetention: cfg.AuditRetention, EventHookAllowPrivate: cfg.eventHookAllowPrivate(),
		EventHookConcurrency: cfg.EventHooksConcurrency})
	if err = w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	stopNotify, err := startNotifyWorker(tc, store, cfg.Notify, "", log)
	if err != nil {
		w.Stop()
		return err
	}
	defer stopNotify()
	log.Info("worker polling", "temporal", cfg.Temporal.Address, "namespace", cfg.Temporal.Namespace)
	if cfg.HealthAddr == "" {
		<-ctx.Done()
	} else {
		// The health listener failing (its address taken) stops the worker.
		err = serveHTTP(ctx, cfg.HealthAddr, workerHealth(store, tc, metrics, log), cfg.ShutdownTimeout, func(a net.Addr) {
			log.Info("worker health listening", "address", a.String())
		})
		if err != nil {
			err = fmt.Errorf("health: %w", err)
		}
	}
	w.Stop()
	return err
}

// workerHealth answers a worker's probes and scrapes: /healthz 200 while the
// process runs; /readyz 200 when the database and Temporal answer, 503
// otherwise, naming what failed in one word (the error itself goes to the
// log only), as the API's /readyz does; /metrics the worker's metrics.
func workerHealth(store *store.Store, tc client.Client, metrics *prometheus.Registry, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeHealth(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		checks := map[string]string{"database": "ok", "temporal": "ok"}
		ready := true
		if err := store.Ping(ctx); err != nil {
			log.Warn("readiness: the database does not answer", "error", err)
			checks["database"], ready = "unavailable", false
		}
		if _, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			log.Warn("readiness: Temporal does not answer", "error", err)
			checks["temporal"], ready = "unavailable", false
		}
		status := http.StatusOK
		if !ready {
			status = http.StatusServiceUnavailable
		}
		writeHealth(w, status, map[string]any{"ready": ready, "checks": checks})
	})
	return mux
}

func writeHealth(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
