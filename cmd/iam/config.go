package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"iam/activities"
	"iam/models/secret"
)

// Config is the whole configuration: environment variables only, each with a
// documented default (docs/configuration.md). Flags of `iam dev` override
// the few they name.
type Config struct {
	// HTTPAddr is where the API listens; empty means 127.0.0.1:8080 for dev
	// and :8080 for serve.
	HTTPAddr string `env:"IAM_HTTP_ADDR"`
	// MetricsAddr, when set, is the internal address that alone serves
	// /metrics (not the API's listener); empty serves /metrics beside the API.
	MetricsAddr string `env:"IAM_METRICS_ADDR"`
	// HealthAddr, when set, is where a worker serves /healthz and /readyz
	// (a worker has no API listener); empty serves none.
	HealthAddr string `env:"IAM_HEALTH_ADDR"`
	// DatabaseURL is the app database: postgres://… for serve, worker and
	// migrate. dev uses sqlite:<data dir>/iam.db unless it is set.
	DatabaseURL  string     `env:"IAM_DATABASE_URL"`
	LogLevel     slog.Level `env:"IAM_LOG_LEVEL" envDefault:"info"`
	MaxBodyBytes int64      `env:"IAM_MAX_BODY_BYTES" envDefault:"1048576"`
	// UploadMaxBytes caps file uploads (quick enrollment CSV and ZIP files).
	UploadMaxBytes int64 `env:"IAM_UPLOAD_MAX_BYTES" envDefault:"268435456"`
	// UploadIdleTimeout cuts an upload that sends nothing for this long.
	UploadIdleTimeout time.Duration `env:"IAM_UPLOAD_IDLE_TIMEOUT" envDefault:"30s"`
	// UploadSweepGrace is how old an upload that never completed must be
	// before the sweep removes what it stored.
	UploadSweepGrace time.Duration `env:"IAM_UPLOAD_SWEEP_GRACE" envDefault:"1h"`
	// EncryptionKey seals uploaded files and enrollment secrets at rest
	// (AES-256-GCM): 32 bytes as 64 hex digits or base64. Required by serve
	// and worker; dev generates one into its data directory.
	EncryptionKey string `env:"IAM_ENCRYPTION_KEY"`
	// AuditSigningKey signs the audit log's digests (Ed25519; its 32-byte
	// seed as base64 or 64 hex digits). The worker seals with it and the
	// API serves its public half; without it events are written but not
	// sealed. dev generates one into its data directory.
	AuditSigningKey string `env:"IAM_AUDIT_SIGNING_KEY"`
	// AuditDigestInterval is how often the worker seals new audit events.
	AuditDigestInterval time.Duration `env:"IAM_AUDIT_DIGEST_INTERVAL" envDefault:"1h"`
	// AuditRetention is how long audit events are kept (digests are kept
	// for ever): 400 days by default.
	AuditRetention time.Duration `env:"IAM_AUDIT_RETENTION" envDefault:"9600h"`
	// EventHooksAllowHTTP lets serve accept http:// hook URLs (dev always
	// does); EventHooksAllowPrivate lists the CIDRs a hook may reach
	// although private, loopback, link-local or reserved (comma-separated;
	// tests name 127.0.0.0/8); EventHooksConcurrency is how many requests
	// one hook has in flight (docs/event-hooks.md).
	EventHooksAllowHTTP    bool   `env:"IAM_EVENT_HOOKS_ALLOW_HTTP"`
	EventHooksAllowPrivate string `env:"IAM_EVENT_HOOKS_ALLOW_PRIVATE"`
	EventHooksConcurrency  int    `env:"IAM_EVENT_HOOKS_CONCURRENCY" envDefault:"1"`
	// ShutdownTimeout bounds a graceful stop.
	ShutdownTimeout time.Duration `env:"IAM_SHUTDOWN_TIMEOUT" envDefault:"20s"`
	// ReconcileInterval is how often the API looks for QUEUED jobs whose
	// start was lost; ReconcileGrace is how old such a job must be.
	ReconcileInterval time.Duration `env:"IAM_RECONCILE_INTERVAL" envDefault:"10s"`
	ReconcileGrace    time.Duration `env:"IAM_RECONCILE_GRACE" envDefault:"15s"`
	// AgentPackagesDir holds the agent packages agents-info shows and
	// download serves (docs/devices.md names the files).
	AgentPackagesDir string `env:"IAM_AGENT_PACKAGES_DIR"`
	// GeoIPDB is a MaxMind-format database (GeoLite2/GeoIP2 Country or City)
	// that geolocation conditions read; without it every address has an
	// unknown location.
	GeoIPDB string `env:"IAM_GEOIP_DB"`
	// AgentCheckinInterval is the check-in interval devices are given.
	AgentCheckinInterval time.Duration `env:"IAM_AGENT_CHECKIN_INTERVAL" envDefault:"60s"`
	// AgentRegistrationsPerAddress and AgentRegistrationsPerKey bound
	// agent registrations per minute from one client address and with one
	// installation key.
	AgentRegistrationsPerAddress int `env:"IAM_AGENT_REGISTRATIONS_PER_ADDRESS" envDefault:"60"`
	AgentRegistrationsPerKey     int `env:"IAM_AGENT_REGISTRATIONS_PER_KEY" envDefault:"600"`
	// MaxDevicesPerOrg caps each organization's devices (and, apart, its
	// NPS extension and IIS module installations).
	MaxDevicesPerOrg int `env:"IAM_MAX_DEVICES_PER_ORG" envDefault:"100000"`
	// MgmtExecutionTimeout is how long an attempt of a management execution
	// may run before it ends time_out; 0 for no deadline.
	MgmtExecutionTimeout time.Duration `env:"IAM_MGMT_EXECUTION_TIMEOUT" envDefault:"24h"`
	// MgmtUploadConcurrency is how many management uploads a process
	// resolves at once; past it an upload is answered 429.
	MgmtUploadConcurrency int `env:"IAM_MGMT_UPLOAD_CONCURRENCY" envDefault:"2"`
	// JobEventStreams is how many job event streams (GET
	// /jobs/{id}/events) a process serves at once; past it 429.
	JobEventStreams int `env:"IAM_JOB_EVENT_STREAMS" envDefault:"500"`
	// AdminPassword is the password `iam orgs create` gives the new
	// organization's admin; empty, one is generated and printed once.
	AdminPassword string `env:"IAM_ADMIN_PASSWORD"`

	Temporal TemporalConfig
	Dev      DevConfig
	OAuth    OAuthConfig   // cmd/iam/oauth.go
	Notify   NotifyConfig  // cmd/iam/notify.go
	Tracing  TracingConfig // cmd/iam/telemetry.go
}

// TemporalConfig points serve and worker at a Temporal frontend.
type TemporalConfig struct {
	Address   string `env:"IAM_TEMPORAL_ADDRESS" envDefault:"127.0.0.1:7233"`
	Namespace string `env:"IAM_TEMPORAL_NAMESPACE" envDefault:"default"`
	// TLS turns on TLS; the files are optional (system roots, no client
	// certificate when empty).
	TLS           bool   `env:"IAM_TEMPORAL_TLS" envDefault:"false"`
	TLSCAFile     string `env:"IAM_TEMPORAL_TLS_CA_FILE"`
	TLSCertFile   string `env:"IAM_TEMPORAL_TLS_CERT_FILE"`
	TLSKeyFile    string `env:"IAM_TEMPORAL_TLS_KEY_FILE"`
	TLSServerName string `env:"IAM_TEMPORAL_TLS_SERVER_NAME"`
}

// DevConfig is read by `iam dev` only.
type DevConfig struct {
	DataDir      string `env:"IAM_DATA_DIR" envDefault:"./data"`
	TemporalPort int    `env:"IAM_DEV_TEMPORAL_PORT" envDefault:"7233"`
	UIPort       int    `env:"IAM_DEV_UI_PORT" envDefault:"8233"`
}

// loadConfig reads the configuration from environ (KEY=VALUE strings).
func loadConfig(environ []string) (Config, error) {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	var cfg Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: vars}); err != nil {
		return cfg, configError(err)
	}
	return cfg, cfg.check()
}

// configError rewrites the env library's aggregate error into one line per
// variable.
func configError(err error) error {
	var agg env.AggregateError
	if errors.As(err, &agg) {
		msgs := make([]string, 0, len(agg.Errors))
		for _, e := range agg.Errors {
			var parse env.ParseError
			if errors.As(e, &parse) {
				// The library names the Go field; the user set a variable.
				msgs = append(msgs, fmt.Sprintf("%s: %v", envKey(reflect.TypeFor[Config](), parse.Name), parse.Err))
				continue
			}
			msgs = append(msgs, e.Error())
		}
		return fmt.Errorf("invalid configuration: %s", strings.Join(msgs, "; "))
	}
	return fmt.Errorf("invalid configuration: %w", err)
}

// envKey returns the environment variable of the field named field in the
// struct type t or the structs it holds, or the field's name when it has none.
func envKey(t reflect.Type, field string) string {
	for f := range t.Fields() {
		if key, _, _ := strings.Cut(f.Tag.Get("env"), ","); f.Name == field && key != "" {
			return key
		}
		if f.Type.Kind() == reflect.Struct {
			if key := envKey(f.Type, field); key != field {
				return key
			}
		}
	}
	return field
}

// check validates what the types alone do not.
func (c Config) check() error {
	var problems []string
	if c.HTTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			problems = append(problems, fmt.Sprintf("IAM_HTTP_ADDR %q is not host:port", c.HTTPAddr))
		}
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			problems = append(problems, fmt.Sprintf("IAM_METRICS_ADDR %q is not host:port", c.MetricsAddr))
		}
	}
	if c.HealthAddr != "" {
		if _, _, err := net.SplitHostPort(c.HealthAddr); err != nil {
			problems = append(problems, fmt.Sprintf("IAM_HEALTH_ADDR %q is not host:port", c.HealthAddr))
		}
	}
	if _, _, err := net.SplitHostPort(c.Temporal.Address); err != nil {
		problems = append(problems, fmt.Sprintf("IAM_TEMPORAL_ADDRESS %q is not host:port", c.Temporal.Address))
	}
	if c.Temporal.Namespace == "" {
		problems = append(problems, "IAM_TEMPORAL_NAMESPACE must not be empty")
	}
	if err := c.Tracing.check(); err != nil {
		problems = append(problems, err.Error())
	}
	if c.AgentCheckinInterval < 5*time.Second || c.AgentCheckinInterval > 24*time.Hour {
		problems = append(problems, "IAM_AGENT_CHECKIN_INTERVAL must be between 5s and 24h")
	}
	if c.AgentRegistrationsPerAddress < 1 || c.AgentRegistrationsPerKey < 1 || c.MaxDevicesPerOrg < 1 {
		problems = append(problems, "IAM_AGENT_REGISTRATIONS_PER_ADDRESS, IAM_AGENT_REGISTRATIONS_PER_KEY and IAM_MAX_DEVICES_PER_ORG must be at least 1")
	}
	if c.MaxBodyBytes < 1024 {
		problems = append(problems, "IAM_MAX_BODY_BYTES must be at least 1024")
	}
	if c.UploadMaxBytes < 1024 {
		problems = append(problems, "IAM_UPLOAD_MAX_BYTES must be at least 1024")
	}
	if c.UploadIdleTimeout <= 0 || c.UploadSweepGrace <= 0 {
		problems = append(problems, "IAM_UPLOAD_IDLE_TIMEOUT and IAM_UPLOAD_SWEEP_GRACE must be positive")
	}
	if c.MgmtExecutionTimeout < 0 {
		problems = append(problems, "IAM_MGMT_EXECUTION_TIMEOUT must not be negative (0: no deadline)")
	}
	if c.MgmtUploadConcurrency < 1 {
		problems = append(problems, "IAM_MGMT_UPLOAD_CONCURRENCY must be at least 1")
	}
	if c.JobEventStreams < 1 {
		problems = append(problems, "IAM_JOB_EVENT_STREAMS must be at least 1")
	}
	if c.AuditSigningKey != "" {
		if _, err := secret.ParseKey(c.AuditSigningKey); err != nil {
			problems = append(problems, "IAM_AUDIT_SIGNING_KEY: "+err.Error())
		}
	}
	if _, err := activities.ParseCIDRs(c.EventHooksAllowPrivate); err != nil {
		problems = append(problems, "IAM_EVENT_HOOKS_ALLOW_PRIVATE: "+err.Error())
	}
	if c.EventHooksConcurrency < 1 || c.EventHooksConcurrency > 1000 {
		problems = append(problems, "IAM_EVENT_HOOKS_CONCURRENCY must be between 1 and 1000")
	}
	if c.AuditDigestInterval < time.Minute {
		problems = append(problems, "IAM_AUDIT_DIGEST_INTERVAL: must be at least 1m")
	}
	if c.EncryptionKey != "" {
		if _, err := secret.ParseKey(c.EncryptionKey); err != nil {
			problems = append(problems, "IAM_ENCRYPTION_KEY: "+err.Error())
		}
	}
	if c.ShutdownTimeout <= 0 || c.ReconcileInterval <= 0 || c.ReconcileGrace < 0 {
		problems = append(problems, "IAM_SHUTDOWN_TIMEOUT and IAM_RECONCILE_INTERVAL must be positive, IAM_RECONCILE_GRACE not negative")
	}
	if (c.Temporal.TLSCertFile == "") != (c.Temporal.TLSKeyFile == "") {
		problems = append(problems, "IAM_TEMPORAL_TLS_CERT_FILE and IAM_TEMPORAL_TLS_KEY_FILE go together")
	}
	for _, p := range []struct {
		port int
		name string
	}{{c.Dev.TemporalPort, "IAM_DEV_TEMPORAL_PORT"}, {c.Dev.UIPort, "IAM_DEV_UI_PORT"}} {
		if p.port < 0 || p.port > 65535 {
			problems = append(problems, p.name+" must be a port number (0 picks a free one)")
		}
	}
	problems = append(problems, c.Notify.problems()...)
	if len(problems) > 0 {
		return fmt.Errorf("invalid configuration: %s", strings.Join(problems, "; "))
	}
	return nil
}

// requireDatabase checks that a production command has a PostgreSQL URL.
func (c Config) requireDatabase() error {
	if c.DatabaseURL == "" {
		return errors.New("invalid configuration: IAM_DATABASE_URL is required (postgres://user:pass@host:5432/db)")
	}
	return nil
}

// tlsConfig builds the Temporal client's TLS settings, or nil without TLS.
func (t TemporalConfig) tlsConfig() (*tls.Config, error) {
	if !t.TLS {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.TLSServerName}
	if t.TLSCAFile != "" {
		pem, err := os.ReadFile(t.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("invalid configuration: IAM_TEMPORAL_TLS_CA_FILE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("invalid configuration: IAM_TEMPORAL_TLS_CA_FILE holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	if t.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.TLSCertFile, t.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("invalid configuration: Temporal client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// configVariables lists every environment variable the binary reads.
func configVariables() ([]string, error) {
	params, err := env.GetFieldParams(&Config{})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(params))
	for _, p := range params {
		out = append(out, p.Key)
	}
	return out, nil
}

// eventHookAllowPrivate is IAM_EVENT_HOOKS_ALLOW_PRIVATE's CIDRs (checked
// by validate).
func (c *Config) eventHookAllowPrivate() []netip.Prefix {
	p, _ := activities.ParseCIDRs(c.EventHooksAllowPrivate)
	return p
}
