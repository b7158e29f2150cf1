//go:build !nodev

// The dev command links the embedded Temporal server and its Web UI
// (iam/deploy/devserver). The production binary is built with -tags nodev
// (deploy/Dockerfile) and leaves them out: serve, worker and migrate do not
// page in what only dev uses (docs/benchmarks.md, "A lighter API process").

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"iam/deploy/devserver"
	"iam/models/hooks"
	"iam/worker"
	"iam/workflows"
)

// devRetention is how long the embedded Temporal keeps closed workflows.
const devRetention = 7 * 24 * time.Hour

func devCommand(environ []string, stdout, stderr io.Writer) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything in one process on embedded defaults",
		Long: "dev runs the API, an in-process Temporal server with its Web UI, and a " +
			"worker, with the app database and Temporal's in SQLite files under the " +
			"data directory. It needs no outside service. A restart finds its data " +
			"and unfinished workflows carry on.",
		Args: cobra.NoArgs,
		RunE: configured(environ, func(cmd *cobra.Command, cfg Config) error {
			if cmd.Flags().Changed("data-dir") {
				cfg.Dev.DataDir = dataDir
			}
			return runDev(cmd.Context(), cfg, stdout, newLogger(stderr, cfg.LogLevel))
		}),
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "./data", "folder of the SQLite files (env IAM_DATA_DIR)")
	return cmd
}

func runDev(ctx context.Context, cfg Config, stdout io.Writer, log *slog.Logger) (err error) {
	started := time.Now()
	dataDir, err := filepath.Abs(cfg.Dev.DataDir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	dsn := cfg.DatabaseURL
	if dsn == "" {
		dsn = "sqlite:" + filepath.Join(dataDir, "iam.db")
	}
	secrets, err := enrollmentSecrets(cfg, dataDir)
	if err != nil {
		return err
	}
	signer, err := auditSigner(cfg, dataDir)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, dsn, true, log)
	if err != nil {
		return err
	}
	defer joinClose(&err, store.Close)
	store.SealBlobs(secrets)
	store.Hooks.SetURLPolicy(hooks.URLPolicy{AllowHTTP: true})
	secret, err := oauthSecret(cfg.OAuth, dataDir, true)
	if err != nil {
		return err
	}
	addr := cfg.HTTPAddr
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	auth, err := bootstrapAuth(ctx, cfg, store, secret, addr, stdout, log)
	if err != nil {
		return err
	}

	ts, err := devserver.Start(ctx, devserver.Config{
		DataDir:          dataDir,
		IP:               "127.0.0.1",
		FrontendPort:     cfg.Dev.TemporalPort,
		UIPort:           cfg.Dev.UIPort,
		Namespace:        cfg.Temporal.Namespace,
		Retention:        devRetention,
		SearchAttributes: workflows.SearchAttributes(),
		Logger:           log.With("component", "temporal-server"),
	})
	if err != nil {
		return fmt.Errorf("start the embedded Temporal server: %w", err)
	}
	defer joinClose(&err, ts.Stop)

	cfg.Temporal.Address = ts.FrontendAddress()
	opts, tr, err := tracedTemporalOptions(ctx, cfg, "iam-dev", log)
	if err != nil {
		return err
	}
	defer tr.Shutdown()
	tc, err := client.DialContext(ctx, opts)
	if err != nil {
		return fmt.Errorf("connect to the embedded Temporal server: %w", err)
	}
	defer tc.Close()
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
	defer w.Stop()
	outbox := filepath.Join(dataDir, "outbox")
	stopNotify, err := startNotifyWorker(tc, store, cfg.Notify, outbox, log)
	if err != nil {
		return err
	}
	defer stopNotify()

	return runAPI(ctx, cfg, addr, store, tc, auth, signer, log, func(a net.Addr) {
		var b strings.Builder
		fmt.Fprintf(&b, "iam dev is ready in %s\n", time.Since(started).Round(time.Millisecond))
		fmt.Fprintf(&b, "  API:              http://%s/api/v1  (OpenAPI: /api/v1/openapi.json)\n", a)
		fmt.Fprintf(&b, "  OAuth:            http://%s/oauth/v2  (metadata: /.well-known/oauth-authorization-server)\n", a)
		fmt.Fprintf(&b, "  Health:           http://%s/readyz  Metrics: /metrics\n", a)
		fmt.Fprintf(&b, "  Temporal Web UI:  http://%s\n", ts.UIAddress())
		fmt.Fprintf(&b, "  Temporal gRPC:    %s  (namespace %s)\n", ts.FrontendAddress(), cfg.Temporal.Namespace)
		fmt.Fprintf(&b, "  Data directory:   %s\n", dataDir)
		fmt.Fprintf(&b, "  Notifications:    %s\n", cfg.Notify.summary(outbox))
		b.WriteString("Press Ctrl-C to stop.\n")
		// The banner only repeats what the log says; the server runs on without it.
		if _, err := io.WriteString(stdout, b.String()); err != nil {
			log.Warn("print the ready banner", "error", err)
		}
	})
}
