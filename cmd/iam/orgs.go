package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"iam/models"
	"iam/models/identity"
	"iam/models/store"
)

// orgsCommand manages organizations (tenants): `iam orgs create|list`, on
// IAM_DATABASE_URL or dev's data directory, as `iam clients` and `iam
// token` do.
func orgsCommand(environ []string, stdout, stderr io.Writer) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "orgs",
		Short: "Create and list organizations (tenants)",
		Long: "orgs manages the organizations of the service. It works on IAM_DATABASE_URL, " +
			"or on the SQLite file of `iam dev` under --data-dir. An organization is made with " +
			"everything the first start gives the first one: its first admin.",
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "./data", "data directory of `iam dev` when IAM_DATABASE_URL is not set (env IAM_DATA_DIR)")

	// run opens the store, then calls body.
	run := func(body func(cmd *cobra.Command, cfg Config, store *store.Store) error) func(*cobra.Command, []string) error {
		return configured(environ, func(cmd *cobra.Command, cfg Config) error {
			return withAdminStore(cmd, cfg, dataDir, newLogger(stderr, cfg.LogLevel), func(store *store.Store) error {
				return body(cmd, cfg, store)
			})
		})
	}

	var name, adminEmail string
	createCmd := &cobra.Command{
		Use:   "create --name NAME --admin-email EMAIL",
		Short: "Create an organization and its first admin; prints them and, once, a generated password",
		Long: "create makes an organization and its first admin (an active administrator), " +
			"the same way the first start of `iam dev` or `iam serve` makes the first " +
			"organization. The admin's password is IAM_ADMIN_PASSWORD when set (at least " +
			"8 characters), else a generated one printed once in the output's " +
			"admin_password. Sign in as the admin, or run `iam token --org ID --user EMAIL`.",
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, cfg Config, store *store.Store) error {
			org := &identity.Organization{Name: strings.TrimSpace(name)}
			admin, generated, err := createOrg(cmd.Context(), store, org, strings.TrimSpace(adminEmail), cfg.AdminPassword,
				newLogger(stderr, cfg.LogLevel))
			if err != nil {
				return err
			}
			out := struct {
				ID            string    `json:"id"`
				Name          string    `json:"name"`
				Created       time.Time `json:"created"`
				AdminID       string    `json:"admin_id"`
				AdminEmail    string    `json:"admin_email"`
				AdminPassword string    `json:"admin_password,omitempty"`
			}{models.FormatID(org.ID), org.Name, org.CreatedAt, models.FormatID(admin.ID), admin.Email, generated}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(out); err != nil {
				return err
			}
			if generated != "" {
				if _, err := fmt.Fprintln(stderr, "Keep the admin's password now: it is stored hashed and shown only this once (set IAM_ADMIN_PASSWORD to choose it)."); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	createCmd.Flags().StringVar(&name, "name", "", "organization name (required)")
	createCmd.Flags().StringVar(&adminEmail, "admin-email", "", "email of the organization's first admin (required)")
	_ = createCmd.MarkFlagRequired("name")
	_ = createCmd.MarkFlagRequired("admin-email")

	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List the organizations, oldest first",
		Args:  cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, _ Config, store *store.Store) error {
			orgs, err := store.Orgs.List(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			if _, err := fmt.Fprintln(w, "ID\tNAME\tCREATED"); err != nil {
				return err
			}
			for _, o := range orgs {
				if _, err := fmt.Fprintf(w, "%d\t%s\t%s\n", o.ID, o.Name, o.CreatedAt.UTC().Format(time.RFC3339)); err != nil {
					return err
				}
			}
			return w.Flush()
		}),
	}

	cmd.AddCommand(createCmd, listCmd)
	return cmd
}
