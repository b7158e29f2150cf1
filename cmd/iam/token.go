package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"iam/api/oauth"
	"iam/models"
	"iam/models/identity"
	"iam/models/oauthstore"
	"iam/models/store"
)

// tokenCommand is `iam token`: tokens for a user straight from the database,
// issued to the organization's self client, for back-end tasks, scripts and
// tests. It prints the token endpoint's JSON answer.
func tokenCommand(environ []string, stdout, stderr io.Writer) *cobra.Command {
	var (
		dataDir, email, scopes, clientID string
		orgID                            int64
		offline                          bool
	)
	cmd := &cobra.Command{
		Use:   "token --user EMAIL --scopes LIST [--offline]",
		Short: "Issue an access token (and with --offline a refresh token) for a user",
		Long: "token issues tokens as the token endpoint would after the user's consent, " +
			"to the organization's self client (made on first use; its secret is printed once " +
			"to stderr) or to --client. The user must be an active admin. It works on " +
			"IAM_DATABASE_URL with IAM_SECRET_KEY (the server's), or on the SQLite file and " +
			"secret of `iam dev` under --data-dir. Send the token as " +
			"`Authorization: Service-oauthtoken <access_token>`.",
		Args: cobra.NoArgs,
		RunE: configured(environ, func(cmd *cobra.Command, cfg Config) (err error) {
			if cmd.Flags().Changed("data-dir") {
				cfg.Dev.DataDir = dataDir
			}
			ctx := cmd.Context()
			log := newLogger(stderr, cfg.LogLevel)
			store, embedded, err := openAdminStore(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer joinClose(&err, store.Close)
			// The tokens must verify on the server: its secret, or dev's file.
			absDataDir, err := filepath.Abs(cfg.Dev.DataDir)
			if err != nil {
				return fmt.Errorf("data directory: %w", err)
			}
			secret, err := oauthSecret(cfg.OAuth, absDataDir, embedded)
			if err != nil {
				return err
			}
			org, err := adminOrg(ctx, store, orgID, cfg.OAuth, stderr, log)
			if err != nil {
				return err
			}
			user, err := store.Users.GetByEmail(ctx, org.ID, email)
			if err != nil {
				return fmt.Errorf("user %q in organization %d: %w", email, org.ID, err)
			}
			if clientID == "" {
				if clientID, err = selfClient(cmd, store, org, stderr); err != nil {
					return err
				}
			}
			srv, err := newOAuthServer(cfg.OAuth, store, secret, publicURL(cfg.OAuth, cmp.Or(cfg.HTTPAddr, "127.0.0.1:8080")), log)
			if err != nil {
				return err
			}
			tok, err := srv.IssueToken(ctx, oauth.IssueRequest{
				ClientID: clientID, OrgID: org.ID, UserID: user.ID, Scopes: oauth.ParseScopes(scopes), Offline: offline,
			})
			if err != nil {
				return err
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(tok) //nolint:gosec // the command prints the token it was asked for
		}),
	}
	cmd.Flags().StringVar(&email, "user", "", "email of the user the token acts for (required)")
	cmd.Flags().StringVar(&scopes, "scopes", "", "scopes, comma-separated: svc.<resource>.<READ|CREATE|UPDATE|DELETE|WRITE|ALL> (required)")
	cmd.Flags().BoolVar(&offline, "offline", false, "issue a refresh token too (as access_type=offline)")
	cmd.Flags().StringVar(&clientID, "client", "", "client id (default: the organization's self client)")
	cmd.Flags().Int64Var(&orgID, "org", 0, "organization id (default: the first organization)")
	cmd.Flags().StringVar(&dataDir, "data-dir", "./data", "data directory of `iam dev` when IAM_DATABASE_URL is not set (env IAM_DATA_DIR)")
	_ = cmd.MarkFlagRequired("user")
	_ = cmd.MarkFlagRequired("scopes")
	return cmd
}

// selfClient returns the id of the organization's self client, registering
// one (and printing its secret once to stderr) when there is none.
func selfClient(cmd *cobra.Command, store *store.Store, org *identity.Organization, stderr io.Writer) (string, error) {
	clients := store.OAuthClients
	c, err := clients.FirstOfType(cmd.Context(), org.ID, oauthstore.ClientSelf)
	if err == nil {
		return c.ID, nil
	}
	if models.ErrorCode(err) != models.ENOTFOUND {
		return "", err
	}
	c = &oauthstore.OAuthClient{OrgID: org.ID, Name: "Self client", Type: oauthstore.ClientSelf}
	secret, err := clients.Create(cmd.Context(), c)
	if err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(stderr, "Registered the self client %s; its secret (for the refresh_token grant), shown only this once: %s\n", c.ID, secret); err != nil {
		return "", err
	}
	return c.ID, nil
}
