package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"iam/api"
	"iam/api/jobrun"
	"iam/api/oauth"
	"iam/models/audit"
	"iam/models/decide"
	"iam/models/sqldb"
	"iam/models/store"
)

// The pieces every command assembles from: logger, store, Temporal client,
// HTTP server. Each command builds the ones it needs.

func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// openStore opens the database, and with migrate set brings its schema up to
// date; without, it refuses a schema that is behind.
func openStore(ctx context.Context, dsn string, migrate bool, log *slog.Logger) (*store.Store, error) {
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if migrate {
		applied, err := sqldb.MigrateUp(ctx, db)
		if err != nil {
			return nil, errors.Join(err, db.Close())
		}
		if len(applied) > 0 {
			log.Info("database migrated", "applied", applied)
		}
	} else if err := checkSchema(ctx, db); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	// Every command that opens the store may make ids: it leases its id
	// node first (models/sqldb/ids_lease.go). Close the store with Close, after
	// the servers stopped, to release it.
	store := store.NewStore(db)
	if err := store.LeaseIDs(ctx, log); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return store, nil
}

// checkSchema fails when migrations are pending.
func checkSchema(ctx context.Context, db *bun.DB) error {
	m, err := sqldb.Migrator(db)
	if err != nil {
		return err
	}
	if err = m.Init(ctx); err != nil {
		return fmt.Errorf("read migration state: %w", err)
	}
	// Not MissingMigrations: that lists applied migrations the binary no
	// longer knows, not the ones it knows that are not applied.
	ms, err := m.MigrationsWithStatus(ctx)
	if err != nil {
		return fmt.Errorf("read migration state: %w", err)
	}
	if pending := ms.Unapplied(); len(pending) > 0 {
		return fmt.Errorf("the database schema is behind by %d migration(s): run `iam migrate up` first", len(pending))
	}
	return nil
}

// temporalOptions are the client options for cfg.
func temporalOptions(cfg TemporalConfig, log *slog.Logger) (client.Options, error) {
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return client.Options{}, err
	}
	return client.Options{
		HostPort:          cfg.Address,
		Namespace:         cfg.Namespace,
		Logger:            sdklog.NewStructuredLogger(log.With("component", "temporal")),
		ConnectionOptions: client.ConnectionOptions{TLS: tlsCfg},
	}, nil
}

// dialTemporal connects to Temporal, retrying until it answers or ctx ends.
func dialTemporal(ctx context.Context, opts client.Options, log *slog.Logger) (client.Client, error) {
	delay := 500 * time.Millisecond
	for {
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			return c, nil
		}
		log.Warn("Temporal is not reachable yet; retrying", "address", opts.HostPort, "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to Temporal at %s: %w", opts.HostPort, err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Second)
	}
}

// auditPublicKey is the public half of signer; nil without one.
func auditPublicKey(signer *audit.Signer) ed25519.PublicKey {
	if signer == nil {
		return nil
	}
	return signer.PublicKey()
}

// apiServer builds the API with its launcher, behind the authorization
// server auth (which validates the API's tokens and serves /oauth/v2).
func apiServer(cfg Config, store *store.Store, tc client.Client, auth *oauth.Server, geo decide.Locator, signer *audit.Signer, log *slog.Logger) (*api.Server, *jobrun.Launcher) {
	launcher := &jobrun.Launcher{Client: tc, Store: store, Log: log}
	proxies, _ := trustedProxies(cfg.OAuth) // newOAuthServer refused them if they are not valid
	srv := api.New(api.Config{MaxBodyBytes: cfg.MaxBodyBytes, UploadMaxBytes: cfg.UploadMaxBytes, UploadIdleTimeout: cfg.UploadIdleTimeout, SeparateMetrics: cfg.MetricsAddr != "",
		AgentPackagesDir: cfg.AgentPackagesDir, AgentCheckinInterval: cfg.AgentCheckinInterval,
		RegistrationsPerAddress: cfg.AgentRegistrationsPerAddress, RegistrationsPerKey: cfg.AgentRegistrationsPerKey,
		MaxDevicesPerOrg: cfg.MaxDevicesPerOrg, TrustedProxies: proxies, MgmtUploadConcurrency: cfg.MgmtUploadConcurrency,
		JobEventStreams: cfg.JobEventStreams}, api.Deps{
		Store:    store,
		Temporal: tc,
		Jobs:     launcher,
		Tokens:   auth,
		OAuth:    auth.Handler(),
		Log:      log,
		Geo:      geo,
		AuditKey: auditPublicKey(signer),
	})
	return srv, launcher
}

// serveHTTP serves h on addr until ctx ends, then shuts down gracefully
// within timeout. ready, when not nil, receives the bound address.
func serveHTTP(ctx context.Context, addr string, h http.Handler, timeout time.Duration, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	// Requests net/http refuses before any handler runs (a malformed
	// header) get the API's JSON error body too.
	ln = api.Listener(ln)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("http shutdown: %w", err)
	}
	return nil
}

// bootstrapAuth makes the first organization and its admin on a fresh
// database, and the authorization server with its token janitor.
func bootstrapAuth(ctx context.Context, cfg Config, store *store.Store, secret []byte, addr string, stdout io.Writer, log *slog.Logger) (*oauth.Server, error) {
	if _, err := bootstrapOrg(ctx, store, cfg.OAuth, stdout, log); err != nil {
		return nil, err
	}
	auth, err := newOAuthServer(cfg.OAuth, store, secret, publicURL(cfg.OAuth, addr), log)
	if err != nil {
		return nil, err
	}
	go every(ctx, time.Hour, func(ctx context.Context) {
		if n, err := auth.PurgeExpired(ctx); err != nil {
			log.Warn("purge expired OAuth tokens", "error", err)
		} else if n > 0 {
			log.Info("purged expired OAuth tokens", "count", n)
		}
	})
	return auth, nil
}

// openGeoIP opens the MaxMind-format database IAM_GEOIP_DB names (nil
// when none is named: every address is then an unknown location). A path
// that does not open as such a database is an error that stops the start,
// rather than decisions that silently locate nothing.
func openGeoIP(path string) (*decide.GeoIP, error) {
	if path == "" {
		return nil, nil
	}
	g, err := decide.OpenGeoIP(path)
	if err != nil {
		return nil, fmt.Errorf("IAM_GEOIP_DB: %w", err)
	}
	return g, nil
}

// runAPI serves the API on addr, with the reconciler of lost job starts and
// orphaned uploads, until ctx ends.
func runAPI(ctx context.Context, cfg Config, addr string, store *store.Store, tc client.Client, auth *oauth.Server, signer *audit.Signer, log *slog.Logger, ready func(net.Addr)) (err error) {
	var geo decide.Locator
	g, err := openGeoIP(cfg.GeoIPDB)
	if err != nil {
		return err
	}
	if g != nil {
		defer joinClose(&err, g.Close)
		geo = g
	}
	srv, launcher := apiServer(cfg, store, tc, auth, geo, signer, log)
	rec := &jobrun.Reconciler{Launcher: launcher, Interval: cfg.ReconcileInterval, Grace: cfg.ReconcileGrace, UploadGrace: cfg.UploadSweepGrace}
	go rec.Run(ctx)
	// Readers number what is left themselves, so a failure here only
	// leaves them more to do (docs/audit.md).
	go every(ctx, auditNumberInterval, func(ctx context.Context) {
		if _, numErr := store.Audit.NumberPending(ctx); numErr != nil && ctx.Err() == nil {
			log.Warn("numbering audit events", "error", numErr)
		}
	})
	if cfg.MetricsAddr == "" {
		return serveHTTP(ctx, addr, srv.Handler(), cfg.ShutdownTimeout, ready)
	}
	// /metrics on its own internal listener; either server failing stops both.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	metricsErr := make(chan error, 1)
	go func() {
		serveErr := serveHTTP(ctx, cfg.MetricsAddr, srv.MetricsHandler(), cfg.ShutdownTimeout, func(a net.Addr) {
			log.Info("metrics listening", "address", a.String())
		})
		if serveErr != nil {
			serveErr = fmt.Errorf("metrics: %w", serveErr)
		}
		cancel()
		metricsErr <- serveErr
	}()
	err = serveHTTP(ctx, addr, srv.Handler(), cfg.ShutdownTimeout, ready)
	cancel()
	return errors.Join(err, <-metricsErr)
}

// auditNumberInterval is how often the API numbers the audit events
// committed since (docs/audit.md).
const auditNumberInterval = time.Second

// every calls fn every interval until ctx ends: the API's background
// work (the token janitor, the audit numbering).
func every(ctx context.Context, interval time.Duration, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}
