package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

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

func runWorker(ctx context.Context, cfg Config, log *slog.Logger) error {
	secrets, err := enrollmentSecrets(cfg, "")
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg.DatabaseURL, false, log)
	if err != nil {
		return err
	}
	defer store.Close()
	store.SealBlobs(secrets)
	opts, err := temporalOptions(cfg.Temporal, log)
	if err != nil {
		return err
	}
	tc, err := dialTemporal(ctx, opts, log)
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := worker.EnsureSearchAttributes(ctx, tc, cfg.Temporal.Namespace); err != nil {
		return err
	}
	w := worker.New(tc, worker.Deps{Store: store, Secrets: secrets})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	stopNotify, err := startNotifyWorker(tc, store, cfg.Notify, "", log)
	if err != nil {
		w.Stop()
		return err
	}
	defer stopNotify()
	log.Info("worker polling", "temporal", cfg.Temporal.Address, "namespace", cfg.Temporal.Namespace)
	<-ctx.Done()
	w.Stop()
	return nil
}
