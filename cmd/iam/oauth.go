package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"iam/api/oauth"
	"iam/models/identity"
	"iam/models/store"
)

// OAuthConfig configures the authorization server and the first admin
// (docs/configuration.md).
type OAuthConfig struct {
	// SecretKey is the global secret token HMACs and sign-in cookies derive
	// from: at least 32 bytes, the same on every instance. serve requires it;
	// dev (and token on dev's database) keeps one in <data dir>/secret.key.
	SecretKey string `env:"IAM_SECRET_KEY"`
	// PublicURL is the service's external base URL: the OAuth issuer and the
	// accounts-server value. Default: http://<listen address>.
	PublicURL string `env:"IAM_PUBLIC_URL"`
	// Location is the location value sent with a code. Default: the host of
	// PublicURL.
	Location string `env:"IAM_OAUTH_LOCATION"`
	// TokenRate and LoginRate are requests a minute per client address at
	// the token (and revocation) endpoint and the sign-in form; bursts are a
	// third of that. 0 turns a limit off.
	TokenRate int `env:"IAM_OAUTH_TOKEN_RATE" envDefault:"60"`
	LoginRate int `env:"IAM_OAUTH_LOGIN_RATE" envDefault:"10"`
	// TrustedProxies are CIDR ranges of proxies whose X-Forwarded-For names
	// the client address for the rate limits.
	TrustedProxies []string `env:"IAM_TRUSTED_PROXIES" envSeparator:","`
	// BootstrapAdminEmail and BootstrapAdminPassword are the first admin's,
	// made on the first start; generated (and printed once) when empty.
	BootstrapAdminEmail    string `env:"IAM_BOOTSTRAP_ADMIN_EMAIL"`
	BootstrapAdminPassword string `env:"IAM_BOOTSTRAP_ADMIN_PASSWORD"`
}

// secretFile is the file under the data directory that keeps the secret of
// an embedded setup.
const secretFile = "secret.key"

// oauthSecret returns the global secret: IAM_SECRET_KEY, or else the one
// kept in dataDir (made on first use, like dev's encryption key, when create
// is set). With neither it says what to set.
func oauthSecret(cfg OAuthConfig, dataDir string, create bool) ([]byte, error) {
	if cfg.SecretKey != "" {
		if len(cfg.SecretKey) < oauth.MinSecretLen {
			return nil, fmt.Errorf("invalid configuration: IAM_SECRET_KEY must be at least %d bytes (for example the output of `openssl rand -base64 48`)", oauth.MinSecretLen)
		}
		return []byte(cfg.SecretKey), nil
	}
	if dataDir == "" {
		return nil, errors.New("invalid configuration: IAM_SECRET_KEY is required (at least 32 random bytes, the same on every instance; for example `openssl rand -base64 48`)")
	}
	path := filepath.Join(dataDir, secretFile)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !create:
		return nil, fmt.Errorf("invalid configuration: IAM_SECRET_KEY is not set and %s does not exist", path)
	case err == nil && fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("the secret file %s may be read by other users (mode %v): run `chmod 600 %s`", path, fi.Mode().Perm(), path)
	}
	text, err := devKey(path)
	if err != nil {
		return nil, err
	}
	if len(text) < oauth.MinSecretLen {
		return nil, fmt.Errorf("the secret file %s holds %d bytes, fewer than %d: delete it to make a new one (signing everyone out)", path, len(text), oauth.MinSecretLen)
	}
	return []byte(text), nil
}

// publicURL is IAM_PUBLIC_URL, or http://<addr> with a wildcard host made
// localhost.
func publicURL(cfg OAuthConfig, addr string) string {
	if cfg.PublicURL != "" {
		return cfg.PublicURL
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}).String()
}

// trustedProxies parses IAM_TRUSTED_PROXIES: CIDR ranges or addresses.
func trustedProxies(cfg OAuthConfig) ([]netip.Prefix, error) {
	var proxies []netip.Prefix
	for _, raw := range cfg.TrustedProxies {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		p, err := netip.ParsePrefix(raw)
		if err != nil {
			addr, aerr := netip.ParseAddr(raw)
			if aerr != nil {
				return nil, fmt.Errorf("invalid configuration: IAM_TRUSTED_PROXIES: %q is not a CIDR range or address", raw)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		proxies = append(proxies, p)
	}
	return proxies, nil
}

// newOAuthServer builds the authorization server of the service.
func newOAuthServer(cfg OAuthConfig, store *store.Store, secret []byte, issuer string, log *slog.Logger) (*oauth.Server, error) {
	proxies, err := trustedProxies(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.TokenRate < 0 || cfg.LoginRate < 0 {
		return nil, errors.New("invalid configuration: IAM_OAUTH_TOKEN_RATE and IAM_OAUTH_LOGIN_RATE must not be negative")
	}
	srv, err := oauth.New(oauth.Config{
		Issuer:         issuer,
		Location:       cfg.Location,
		Secret:         secret,
		TokenRate:      oauth.RateLimit{PerMinute: cfg.TokenRate, Burst: max(1, cfg.TokenRate/3)},
		LoginRate:      oauth.RateLimit{PerMinute: cfg.LoginRate, Burst: max(1, cfg.LoginRate/3)},
		TrustedProxies: proxies,
	}, oauth.Deps{Store: store, Log: log})
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: %w (IAM_PUBLIC_URL, IAM_SECRET_KEY)", err)
	}
	return srv, nil
}

// openAdminStore opens the database the admin commands (clients, token) work
// on: IAM_DATABASE_URL, whose schema must be current, or else dev's SQLite
// file under the data directory, migrated as dev would. embedded tells which.
func openAdminStore(ctx context.Context, cfg Config, log *slog.Logger) (store *store.Store, embedded bool, err error) {
	if cfg.DatabaseURL != "" {
		store, err = openStore(ctx, cfg.DatabaseURL, false, log)
		return store, false, err
	}
	dataDir, err := filepath.Abs(cfg.Dev.DataDir)
	if err != nil {
		return nil, false, fmt.Errorf("data directory: %w", err)
	}
	store, err = openStore(ctx, "sqlite:"+filepath.Join(dataDir, "iam.db"), true, log)
	return store, true, err
}

// withAdminStore runs body on the store of openAdminStore, the command's
// --data-dir (dataDir) standing for IAM_DATA_DIR when given, and closes it
// after: a failed close fails the command.
func withAdminStore(cmd *cobra.Command, cfg Config, dataDir string, log *slog.Logger, body func(store *store.Store) error) (err error) {
	if cmd.Flags().Changed("data-dir") {
		cfg.Dev.DataDir = dataDir
	}
	store, _, err := openAdminStore(cmd.Context(), cfg, log)
	if err != nil {
		return err
	}
	defer joinClose(&err, store.Close)
	return body(store)
}

// adminOrg is the organization an admin command works in: the one of id, or
// the first one (made with its admin, as on dev's first start, when there is
// none; a generated password is printed to out).
func adminOrg(ctx context.Context, store *store.Store, id int64, cfg OAuthConfig, out io.Writer, log *slog.Logger) (*identity.Organization, error) {
	if id != 0 {
		return store.Orgs.Get(ctx, id)
	}
	return bootstrapOrg(ctx, store, cfg, out, log)
}
