package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"iam/api/oauth"
	"iam/models/identity"
	"iam/models/oauthstore"
	"iam/models/store"
)

// clientsCommand manages the OAuth clients of an organization: `iam clients
// create|list|delete`, on IAM_DATABASE_URL or dev's data directory.
func clientsCommand(environ []string, stdout, stderr io.Writer) *cobra.Command {
	var dataDir string
	var orgID int64
	cmd := &cobra.Command{
		Use:   "clients",
		Short: "Register, list and delete OAuth clients (applications)",
		Long: "clients manages the applications registered with the authorization server. " +
			"It works on IAM_DATABASE_URL, or on the SQLite file of `iam dev` under --data-dir. " +
			"Types: server (server-based: a web application with a back end; gets a secret), " +
			"browser (client-based: runs in the browser only), mobile (mobile-based), " +
			"non-browser-mobile (a device application), self (self client: back-end tasks " +
			"and scripts of the organization, tokens from `iam token`), service (a provisioning " +
			"engine acting for itself: tokens with grant_type=client_credentials, holding the svc.scim " +
			"scopes given with --scopes; no user, so /scim/v2 only). browser and the mobile " +
			"types are public: they get no secret and must use PKCE with S256.",
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "./data", "data directory of `iam dev` when IAM_DATABASE_URL is not set (env IAM_DATA_DIR)")
	cmd.PersistentFlags().Int64Var(&orgID, "org", 0, "organization id (default: the first organization)")

	// run opens the store and organization, then calls body.
	run := func(body func(cmd *cobra.Command, env *adminEnv) error) func(*cobra.Command, []string) error {
		return configured(environ, func(cmd *cobra.Command, cfg Config) error {
			log := newLogger(stderr, cfg.LogLevel)
			return withAdminStore(cmd, cfg, dataDir, log, func(store *store.Store) error {
				org, err := adminOrg(cmd.Context(), store, orgID, cfg.OAuth, stderr, log)
				if err != nil {
					return err
				}
				return body(cmd, &adminEnv{clients: store.OAuthClients, org: org})
			})
		})
	}

	var create struct {
		name, homepage, typ, scopes string
		redirects                   []string
	}
	createCmd := &cobra.Command{
		Use:   "create --name NAME --type TYPE [--homepage URL] [--redirect-uri URI]... [--scopes LIST]",
		Short: "Register a client; prints its id and, once, its secret",
		Args:  cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, env *adminEnv) error {
			c := &oauthstore.OAuthClient{OrgID: env.org.ID, Name: create.name, HomepageURL: create.homepage,
				Type: clientTypeFromFlag(create.typ), RedirectURIs: create.redirects, Scopes: oauth.ParseScopes(create.scopes)}
			secret, err := env.clients.Create(cmd.Context(), c)
			if err != nil {
				return err
			}
			out := struct {
				*oauthstore.OAuthClient
				Secret string `json:"client_secret,omitempty"`
			}{c, secret}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(out); err != nil { //nolint:gosec // the command prints the new client's secret to its operator, once
				return err
			}
			var note string
			if secret != "" && c.Type == oauthstore.ClientService {
				note = "Keep the client secret now: it is stored hashed and shown only this once. " +
					"Get a token with POST /oauth/v2/token, grant_type=client_credentials, the client id and secret (HTTP Basic)."
			} else if secret != "" {
				note = "Keep the client secret now: it is stored hashed and shown only this once."
			} else if c.Type.Public() {
				note = "A public client has no secret: it must send code_challenge with code_challenge_method=S256 (PKCE)."
			}
			if note != "" {
				if _, err := fmt.Fprintln(stderr, note); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	createCmd.Flags().StringVar(&create.name, "name", "", "client name shown on the consent page (required)")
	createCmd.Flags().StringVar(&create.typ, "type", "server", "server, browser, mobile, non-browser-mobile, self or service")
	createCmd.Flags().StringVar(&create.homepage, "homepage", "", "homepage URL (required for server)")
	createCmd.Flags().StringVar(&create.scopes, "scopes", "", "a service client's scopes, comma-separated: svc.scim.<READ|WRITE|CREATE|UPDATE|DELETE|ALL> (required for service; no other type takes any)")
	createCmd.Flags().StringArrayVar(&create.redirects, "redirect-uri", nil, "authorized redirect URI, exactly as the client will send it (repeat for more)")

	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List the organization's clients",
		Args:  cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, env *adminEnv) error {
			clients, err := env.clients.List(cmd.Context(), env.org.ID)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			if _, err := fmt.Fprintln(w, "CLIENT ID\tTYPE\tNAME\tREDIRECT URIS\tSCOPES\tCREATED"); err != nil {
				return err
			}
			for _, c := range clients {
				if _, err := fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Type, c.Name, strings.Join(c.RedirectURIs, " "), strings.Join(c.Scopes, " "), c.CreatedAt.UTC().Format(time.RFC3339)); err != nil {
					return err
				}
			}
			return w.Flush()
		}),
	}

	deleteCmd := &cobra.Command{
		Use:   "delete CLIENT_ID",
		Short: "Delete a client and every code and token it holds",
		Args:  cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, env *adminEnv) error {
			id := cmd.Flags().Arg(0)
			if err := env.clients.Delete(cmd.Context(), env.org.ID, id); err != nil {
				return err
			}
			_, err := fmt.Fprintf(stdout, "deleted client %s\n", id)
			return err
		}),
	}
	cmd.AddCommand(createCmd, listCmd, deleteCmd)
	return cmd
}

// adminEnv is what a clients subcommand works with.
type adminEnv struct {
	clients *oauthstore.ClientStore
	org     *identity.Organization
}

// clientTypeFromFlag accepts the type names and the interface's words for
// them (client-based, server-based, mobile-based, self-client).
func clientTypeFromFlag(s string) oauthstore.ClientType {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "client-based":
		return oauthstore.ClientBrowser
	case "server-based":
		return oauthstore.ClientServer
	case "mobile-based":
		return oauthstore.ClientMobile
	case "self-client":
		return oauthstore.ClientSelf
	}
	return oauthstore.ClientType(strings.ToLower(strings.TrimSpace(s)))
}
