package main

import (
	"context"
	"io"
	"log/slog"
	"net"

	"iam/models/hooks"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
)

func serveCommand(environ []string, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the API against PostgreSQL and a Temporal cluster",
		Long: "serve runs the REST API and the OAuth server. It needs IAM_DATABASE_URL " +
			"(PostgreSQL, migrated with `iam migrate up`) and a Temporal frontend " +
			"(IAM_TEMPORAL_ADDRESS). Several may run at once.",
		Args: cobra.NoArgs,
		RunE: configured(environ, func(cmd *cobra.Command, cfg Config) error {
			if err := cfg.requireDatabase(); err != nil {
				return err
			}
			return runServe(cmd.Context(), cfg, stdout, newLogger(stderr, cfg.LogLevel))
		}),
	}
}

func runServe(ctx context.Context, cfg Config, stdout io.Writer, log *slog.Logger) (err error) {
	// Configuration first: a missing secret must not leave a half-bootstrapped database.
	secret, err := oauthSecret(cfg.OAuth, "", false)
	if err != nil {
		return err
	}
	box, err := enrollmentSecrets(cfg, "")
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
	store.SealBlobs(box)
	store.Hooks.SetURLPolicy(hooks.URLPolicy{AllowHTTP: cfg.EventHooksAllowHTTP})
	addr := cfg.HTTPAddr
	if addr == "" {
		addr = ":8080"
	}
	auth, err := bootstrapAuth(ctx, cfg, store, secret, addr, stdout, log)
	if err != nil {
		return err
	}
	opts, tr, err := tracedTemporalOptions(ctx, cfg, "iam-serve", log)
	if err != nil {
		return err
	}
	defer tr.Shutdown()
	// A lazy client lets the API start, and accept jobs as QUEUED, while
	// Temporal is down; the reconciler starts them once it is back.
	tc, err := client.NewLazyClient(opts)
	if err != nil {
		return err
	}
	defer tc.Close()

	return runAPI(ctx, cfg, addr, store, tc, auth, signer, log, func(a net.Addr) {
		log.Info("API listening", "address", a.String(), "temporal", cfg.Temporal.Address, "namespace", cfg.Temporal.Namespace)
	})
}
