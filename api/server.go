// Package api is the service's HTTP surface: the /api/v1 REST routes, their
// authentication and scope checks, the error model, the list conventions'
// HTTP side, health, metrics and the OpenAPI document. routes.go lists the
// whole surface.
package api

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/gin-gonic/gin"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"

	"iam/api/auth"
	"iam/api/jobrun"
	"iam/api/scim"
	"iam/models/audit"
	"iam/models/decide"
	"iam/models/store"
)

// Config holds the API's tunables.
type Config struct {
	// MaxBodyBytes caps JSON request bodies (413 beyond it).
	MaxBodyBytes int64
	// UploadMaxBytes caps file uploads (the whole multipart body, and the
	// file kept); 256 MiB when zero.
	UploadMaxBytes int64
	// SeparateMetrics leaves /metrics off Handler: the caller serves
	// MetricsHandler on an internal address of its own (IAM_METRICS_ADDR).
	SeparateMetrics bool
	// UploadIdleTimeout cuts an upload whose body brings no data for this
	// long (each read extends the deadline, so a slow but steady upload goes
	// on); DefaultUploadIdleTimeout when zero, none when negative.
	UploadIdleTimeout time.Duration
	// AgentCheckinInterval is the check-in interval devices are given
	// (IAM_AGENT_CHECKIN_INTERVAL); models.DefaultCheckinInterval when zero.
	AgentCheckinInterval time.Duration
	// AgentRate (requests per second) and AgentBurst bound each device's
	// check-ins; DefaultAgentRate and DefaultAgentBurst when zero.
	AgentRate  float64
	AgentBurst int
	// AgentPackagesDir holds the agent packages agents-info shows and
	// download serves (IAM_AGENT_PACKAGES_DIR; agents.go names the files).
	AgentPackagesDir string
	// RegistrationsPerAddress and RegistrationsPerKey bound agent
	// registrations per minute from one client address and with one
	// installation key (IAM_AGENT_REGISTRATIONS_PER_ADDRESS, _PER_KEY);
	// DefaultRegistrationsPerAddress and DefaultRegistrationsPerKey when
	// zero.
	RegistrationsPerAddress int
	RegistrationsPerKey     int
	// MaxDevicesPerOrg caps each organization's devices, and apart its
	// installations (IAM_MAX_DEVICES_PER_ORG); DefaultMaxDevicesPerOrg
	// when zero.
	MaxDevicesPerOrg int
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client for the agent channel's limits (IAM_TRUSTED_PROXIES; the
	// authorization server's rule, clientaddr.Key).
	TrustedProxies []netip.Prefix
	// IdempotencyLease is how long a request owns its Idempotency-Key
	// without renewing it; DefaultIdempotencyLease when zero (tests shorten
	// it).
	IdempotencyLease time.Duration
	// MgmtUploadConcurrency is how many management uploads the process
	// resolves at once (IAM_MGMT_UPLOAD_CONCURRENCY); past it an upload is
	// answered 429. DefaultMgmtUploadConcurrency when zero.
	MgmtUploadConcurrency int
	// JobEventsPoll is how often a process reads the jobs its event streams
	// follow (GET /jobs/{id}/events); DefaultJobEventsPoll when zero.
	JobEventsPoll time.Duration
	// JobEventsHeartbeat is how often a quiet event stream sends a comment
	// to keep proxies from closing it; DefaultJobEventsHeartbeat when zero.
	JobEventsHeartbeat time.Duration
	// JobEventStreams bounds the event streams a process serves at once
	// (IAM_JOB_EVENT_STREAMS); past it a stream is answered 429.
	// DefaultJobEventStreams when zero.
	JobEventStreams int
}

// DefaultUploadIdleTimeout is the upload idle limit when Config sets none.
const DefaultUploadIdleTimeout = 30 * time.Second

// DefaultUploadMaxBytes is the upload limit when Config sets none.
const DefaultUploadMaxBytes = 256 << 20

// Deps are the API's collaborators.
type Deps struct {
	Store    *store.Store
	Temporal client.Client
	Jobs     *jobrun.Launcher
	Tokens   auth.TokenValidator
	Log      *slog.Logger
	// OAuth serves /oauth/v2/... and the authorization server metadata;
	// nil leaves them unrouted.
	OAuth http.Handler
	// Geo locates addresses for geolocation conditions (IAM_GEOIP_DB); nil:
	// every address has an unknown location.
	Geo decide.Locator
	// AuditKey checks the audit digests' signatures (the public half of
	// IAM_AUDIT_SIGNING_KEY); nil when the service has none.
	AuditKey ed25519.PublicKey
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	deps    Deps
	store   *store.Store
	log     *slog.Logger
	metrics *prometheus.Registry
	engine  *gin.Engine
	// agentLimits rate-limits each device's check-ins and authorizations,
	// registrations the agent channel's registrations.
	agentLimits   *keyLimits[int64]
	registrations *registrationLimits
	packages      agentPackages
	// agentSettings caches each organization's check-in settings briefly.
	agentSettings *lru.Cache[int64, cachedSettings]
	// agentReports remembers each device's last accepted check-in
	// (agentReport).
	agentReports *lru.Cache[int64, reportMemo]
	// decisions caches each organization's compiled policies.
	decisions *decide.Cache
	// mgmtUploads holds a token for each management upload being resolved
	// (Config.MgmtUploadConcurrency of them at most).
	mgmtUploads chan struct{}
	// jobWatch polls the jobs followed by event streams (jobs_events.go).
	jobWatch *jobWatcher
	// scim serves /scim/v2 (SCIMRoutes).
	scim *scim.Server
}

// New builds the API's handler with every route of routes.go.
func New(cfg Config, deps Deps) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.UploadMaxBytes <= 0 {
		cfg.UploadMaxBytes = DefaultUploadMaxBytes
	}
	if cfg.UploadIdleTimeout == 0 {
		cfg.UploadIdleTimeout = DefaultUploadIdleTimeout
	}
	if cfg.MaxDevicesPerOrg <= 0 {
		cfg.MaxDevicesPerOrg = DefaultMaxDevicesPerOrg
	}
	if cfg.MgmtUploadConcurrency <= 0 {
		cfg.MgmtUploadConcurrency = DefaultMgmtUploadConcurrency
	}
	if cfg.JobEventsPoll <= 0 {
		cfg.JobEventsPoll = DefaultJobEventsPoll
	}
	if cfg.JobEventsHeartbeat <= 0 {
		cfg.JobEventsHeartbeat = DefaultJobEventsHeartbeat
	}
	if cfg.JobEventStreams <= 0 {
		cfg.JobEventStreams = DefaultJobEventStreams
	}
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	s := &Server{cfg: cfg, deps: deps, store: deps.Store, log: deps.Log, metrics: prometheus.NewRegistry(),
		agentLimits:   newAgentLimits(cfg.AgentRate, cfg.AgentBurst),
		registrations: newRegistrationLimits(cfg.RegistrationsPerAddress, cfg.RegistrationsPerKey),
		packages:      agentPackages{dir: cfg.AgentPackagesDir},
		agentSettings: newLRU[int64, cachedSettings](10_000), agentReports: newLRU[int64, reportMemo](agentLimiters)}
	s.decisions = decide.NewCache(decisionSource{store: deps.Store}, 10_000)
	s.mgmtUploads = make(chan struct{}, cfg.MgmtUploadConcurrency)
	if deps.Store != nil {
		s.jobWatch = newJobWatcher(deps.Store.Jobs, cfg.JobEventsPoll, cfg.JobEventStreams, deps.Log)
	}
	s.scim = scim.New(deps.Store, deps.Tokens, deps.Log)
	s.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if deps.Store != nil {
		s.metrics.MustRegister(newJobsCollector(deps.Store, deps.Log))
		refusals := deps.Store.Refusals
		s.metrics.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "iam_audit_refusals_dropped_total",
			Help: "Refusals (403s, failed sign-ins, refused registrations) past their organization's rate bound, not written to the audit log.",
		}, func() float64 { return float64(refusals.Dropped()) }))
	}
	s.engine = s.newEngine()
	return s
}

// Handler returns the http.Handler to serve. Handlers hand the request's
// context, never gin's pooled one, to the database and Temporal
// (TestHandlers_HandTheRequestContext): database/sql may still read a
// context from a goroutine of its own after the handler returned, when gin
// already reuses its context for the next request.
func (s *Server) Handler() http.Handler { return s.engine }

// MetricsHandler serves the Prometheus metrics, for an internal address
// (Config.SeparateMetrics).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{})
}

func (s *Server) newEngine() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	r.Use(requestID(s.log), origin(s.cfg.TrustedProxies), traceRequests(), recoverer(), accessLog(), newHTTPMetrics(s.metrics).middleware())
	r.NoRoute(func(c *gin.Context) {
		abortWithError(c, newAPIError(http.StatusNotFound, CodeRouteNotFound, "Route Not Found", "no route "+c.Request.Method+" "+c.Request.URL.Path))
	})
	routes := s.Routes()
	fixed := newFixedPaths("/api/v1", routes)
	r.NoMethod(fixed.methodNotAllowed)

	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	if !s.cfg.SeparateMetrics {
		r.GET("/metrics", gin.WrapH(s.MetricsHandler()))
	}
	r.GET("/api/v1/openapi.json", handle(s.openAPI))
	if s.deps.OAuth != nil {
		r.Any("/oauth/v2/*path", gin.WrapH(s.deps.OAuth))
		r.GET("/.well-known/oauth-authorization-server", gin.WrapH(s.deps.OAuth))
	}

	// The agent channel: device credentials, not OAuth tokens (agent.go).
	agent := r.Group("/agent/v1", limitBody(DefaultAgentMaxBody))
	agent.POST("/register", handle(s.agentRegister))
	agent.POST("/checkin", quiet(), handle(s.agentCheckin))
	agent.POST("/authorize", handle(s.agentAuthorize))

	v1 := r.Group("/api/v1", fixed.win(), authenticate(s.deps.Tokens), noEmptyQuery())
	for _, rt := range routes {
		limit := rt.MaxBody
		if limit == 0 {
			limit = s.cfg.MaxBodyBytes
		}
		h := rt.Handler
		if rt.Idempotent {
			h = s.idempotent(h)
		}
		v1.Handle(rt.Method, rt.Path, limitBody(limit), requireScopes(s.refusals(), routeName(rt.Method, rt.Path), rt.Scopes), h)
	}
	// SCIM 2.0 (docs/scim.md): its own bearer tokens, media type and errors.
	s.scim.Mount(r, s.SCIMRoutes())
	return r
}

// refusals is the store's refusal log, nil without a store.
func (s *Server) refusals() *audit.RefusalLog {
	if s.store == nil {
		return nil
	}
	return s.store.Refusals
}

// healthz answers 200 while the process runs.
func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readyz answers 200 when the database and Temporal answer, 503 otherwise,
// naming what failed in one word ("unavailable"); the error itself (which
// may name hosts, users or files) goes to the log only.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	checks := gin.H{"database": "ok", "temporal": "ok"}
	ready := true
	if err := s.store.Ping(ctx); err != nil {
		logger(c).Warn("readiness: the database does not answer", "error", err)
		checks["database"], ready = "unavailable", false
	}
	if s.deps.Temporal == nil {
		checks["temporal"], ready = "not configured", false
	} else if _, err := s.deps.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		logger(c).Warn("readiness: Temporal does not answer", "error", err)
		checks["temporal"], ready = "unavailable", false
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	c.JSON(status, gin.H{"ready": ready, "checks": checks})
}
