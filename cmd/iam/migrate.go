package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"iam/models/sqldb"
)

func migrateCommand(environ []string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, roll back or list the database migrations (IAM_DATABASE_URL)",
	}
	step := func(use, short string, body func(ctx context.Context, cfg Config) error) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: configured(environ, func(cmd *cobra.Command, cfg Config) error {
				if err := cfg.requireDatabase(); err != nil {
					return err
				}
				return body(cmd.Context(), cfg)
			}),
		}
	}
	cmd.AddCommand(
		step("up", "Apply every pending migration", func(ctx context.Context, cfg Config) (err error) {
			db, err := sqldb.Open(ctx, cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer joinClose(&err, db.Close)
			applied, err := sqldb.MigrateUp(ctx, db)
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				if _, err := fmt.Fprintln(stdout, "nothing to migrate: the schema is up to date"); err != nil {
					return err
				}
			}
			for _, name := range applied {
				if _, err := fmt.Fprintln(stdout, "applied", name); err != nil {
					return err
				}
			}
			return nil
		}),
		step("down", "Roll back the last group of migrations", func(ctx context.Context, cfg Config) (err error) {
			db, err := sqldb.Open(ctx, cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer joinClose(&err, db.Close)
			rolledBack, err := sqldb.MigrateDown(ctx, db)
			if err != nil {
				return err
			}
			if len(rolledBack) == 0 {
				if _, err := fmt.Fprintln(stdout, "nothing to roll back"); err != nil {
					return err
				}
			}
			for _, name := range rolledBack {
				if _, err := fmt.Fprintln(stdout, "rolled back", name); err != nil {
					return err
				}
			}
			return nil
		}),
		step("status", "List the migrations and whether each is applied", func(ctx context.Context, cfg Config) (err error) {
			db, err := sqldb.Open(ctx, cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer joinClose(&err, db.Close)
			return sqldb.WriteMigrationStatus(ctx, db, stdout)
		}),
	)
	return cmd
}
