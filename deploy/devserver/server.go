package devserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enums "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/searchattribute/sadefs"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Defaults used by DefaultConfig and for empty Config fields.
const (
	DefaultIP           = "127.0.0.1"
	DefaultFrontendPort = 7233
	DefaultUIPort       = 8233
	DefaultNamespace    = "default"
	// MinRetention is both the default and the smallest accepted retention of
	// closed workflows.
	MinRetention = 7 * 24 * time.Hour
	// DatabaseFile is the SQLite file's name inside Config.DataDir.
	DatabaseFile = "temporal.db"
)

// startTimeout bounds Start when its context has no deadline.
const startTimeout = time.Minute

// nsCacheRefresh is how often every service reloads namespaces from SQLite
// (which has no change notifications). The server's default is 2s; 1s halves
// the wait for search attributes added on a restart, and a reload is one
// small query per service.
const nsCacheRefresh = time.Second

// Config describes a dev server. The zero value of every field but DataDir
// is usable; note that zero ports mean "pick a free port" (DefaultConfig sets
// the well-known ports 7233 and 8233).
type Config struct {
	// DataDir holds the SQLite file (DataDir/temporal.db). It is created if
	// missing. Required.
	DataDir string
	// IP the frontend and the UI listen on. Default 127.0.0.1. A wildcard
	// (0.0.0.0, ::) listens everywhere; clients are then given the loopback
	// address.
	IP string
	// FrontendPort is the gRPC port for SDK clients; 0 picks a free port.
	FrontendPort int
	// UIPort is the Web UI's HTTP port; 0 picks a free port.
	UIPort int
	// DisableUI turns the Web UI off.
	DisableUI bool
	// Namespace to create and serve. Default "default".
	Namespace string
	// Retention of closed workflows in Namespace. Default and minimum 7 days.
	// A different value on a later start updates the namespace.
	Retention time.Duration
	// SearchAttributes are custom search attributes registered on Namespace
	// (name -> type), usable in start options and visibility queries. Ones
	// already registered are kept; registering a name again with another type
	// is an error. The SQLite store has a fixed number of slots per type
	// (e.g. 10 Keyword, 3 Int).
	SearchAttributes map[string]enums.IndexedValueType
	// Logger receives the server's own log records, at LogLevel and above,
	// tagged component=temporal. Nil discards them.
	Logger *slog.Logger
	// LogLevel is the least severe level passed on from the server. Nil means
	// slog.LevelWarn: the server is chatty at info.
	LogLevel slog.Leveler
}

// DefaultConfig returns the configuration `iam dev` starts from: 127.0.0.1,
// frontend on 7233, UI on 8233, namespace "default", 7 days retention.
func DefaultConfig(dataDir string) Config {
	return Config{
		DataDir:      dataDir,
		IP:           DefaultIP,
		FrontendPort: DefaultFrontendPort,
		UIPort:       DefaultUIPort,
		Namespace:    DefaultNamespace,
		Retention:    MinRetention,
	}
}

func (c Config) withDefaults() (Config, error) {
	if c.DataDir == "" {
		return c, errors.New("devserver: DataDir is required")
	}
	dir, err := filepath.Abs(c.DataDir)
	if err != nil {
		return c, fmt.Errorf("devserver: DataDir: %w", err)
	}
	if strings.ContainsAny(dir, "?#") {
		// The server builds a file: URI from the path without escaping.
		return c, fmt.Errorf("devserver: DataDir %q must not contain '?' or '#'", dir)
	}
	c.DataDir = dir
	if c.IP == "" {
		c.IP = DefaultIP
	}
	if net.ParseIP(c.IP) == nil {
		return c, fmt.Errorf("devserver: IP %q is not an IP address", c.IP)
	}
	if c.FrontendPort < 0 || c.FrontendPort > 65535 || c.UIPort < 0 || c.UIPort > 65535 {
		return c, errors.New("devserver: ports must be within 0..65535")
	}
	if !c.DisableUI && c.FrontendPort != 0 && c.FrontendPort == c.UIPort {
		return c, fmt.Errorf("devserver: frontend and UI cannot share port %d", c.UIPort)
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Retention == 0 {
		c.Retention = MinRetention
	}
	if c.Retention < MinRetention {
		return c, fmt.Errorf("devserver: Retention %v is below the minimum of %v", c.Retention, MinRetention)
	}
	for name, typ := range c.SearchAttributes {
		if name == "" || sadefs.IsReserved(name) {
			return c, fmt.Errorf("devserver: %q cannot be a custom search attribute name", name)
		}
		if _, known := enums.IndexedValueType_name[int32(typ)]; !known || typ == enums.INDEXED_VALUE_TYPE_UNSPECIFIED {
			return c, fmt.Errorf("devserver: search attribute %q has no valid type (%v)", name, typ)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.LogLevel == nil {
		c.LogLevel = slog.LevelWarn
	}
	return c, nil
}

// Server is a running dev server. Stop it with Stop.
type Server struct {
	cfg          Config
	level        *serverLevel
	log          *slog.Logger // filtered at level, component=temporal
	temporal     temporal.Server
	ui           *webUI
	frontendAddr string
	uiAddr       string
	dbPath       string

	stopOnce sync.Once
	stopErr  error
}

// Start sets up the database when new, starts the Temporal services and the
// Web UI, and returns once the frontend serves the namespace with its search
// attributes and the UI answers. ctx bounds the start-up (one minute when it
// has no deadline); it does not bound the server's life.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	began := time.Now()
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	level := &serverLevel{configured: cfg.LogLevel}
	s := &Server{
		cfg:    cfg,
		level:  level,
		log:    slog.New(minLevelHandler{min: level, inner: cfg.Logger.Handler()}).With("component", "temporal"),
		dbPath: filepath.Join(cfg.DataDir, DatabaseFile),
	}

	if err = os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	ports, err := pickPorts(cfg)
	if err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	s.frontendAddr = net.JoinHostPort(dialIP(cfg.IP), strconv.Itoa(ports.frontend))

	// Storage: schema when the file is new, namespace when missing.
	if _, err := ensureSchema(ctx, s.dbPath); err != nil {
		return nil, fmt.Errorf("devserver: database schema: %w", err)
	}
	sqlCfg := sqlStoreConfig(s.dbPath)
	if err := ensureNamespace(sqlCfg, cfg.Namespace, cfg.Retention, cfg.SearchAttributes); err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}

	// Temporal services.
	if err := s.startTemporal(sqlCfg, ports); err != nil {
		return nil, fmt.Errorf("devserver: start Temporal: %w", err)
	}
	if err := s.awaitFrontend(ctx); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("devserver: %w", err)
	}

	// Web UI.
	if !cfg.DisableUI {
		ui, err := startUI(ctx, cfg.IP, ports.ui, s.frontendAddr, cfg.Namespace)
		if err != nil {
			_ = s.Stop()
			return nil, fmt.Errorf("devserver: %w", err)
		}
		s.ui = ui
		s.uiAddr = net.JoinHostPort(dialIP(cfg.IP), strconv.Itoa(ports.ui))
	}

	cfg.Logger.Info("temporal dev server started",
		"frontend", s.frontendAddr, "ui", s.UIURL(), "namespace", cfg.Namespace,
		"database", s.dbPath, "took", time.Since(began).Round(time.Millisecond))
	return s, nil
}

// serverLevel is the least level passed on from the server: the configured
// one, raised to error once Stop has begun.
type serverLevel struct {
	configured slog.Leveler
	stopping   atomic.Bool
}

func (l *serverLevel) Level() slog.Level {
	if lv := l.configured.Level(); !l.stopping.Load() || lv > slog.LevelError {
		return lv
	}
	return slog.LevelError
}

type portSet struct {
	frontend, ui, history, matching, worker int
}

// pickPorts resolves zero ports to free ones and checks the fixed ones.
// Internal services always listen on loopback ports of their own.
func pickPorts(cfg Config) (portSet, error) {
	var p portSet
	var err error
	pick := func(what, ip string, fixed int, dst *int) {
		if err != nil {
			return
		}
		if fixed != 0 {
			*dst, err = fixed, checkPortFree(what, ip, fixed)
			return
		}
		*dst, err = freePort(ip)
	}
	pick("frontend", cfg.IP, cfg.FrontendPort, &p.frontend)
	if !cfg.DisableUI {
		pick("UI", cfg.IP, cfg.UIPort, &p.ui)
	}
	pick("history", "127.0.0.1", 0, &p.history)
	pick("matching", "127.0.0.1", 0, &p.matching)
	pick("worker", "127.0.0.1", 0, &p.worker)
	return p, err
}

// startTemporal builds and starts the server. The server reports fatal
// conditions through its logger, which panics (see temporalLogger.Fatal);
// such a panic during construction or start becomes the returned error.
func (s *Server) startTemporal(sqlCfg *config.SQL, ports portSet) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
		if err != nil && s.temporal != nil {
			// Half started: stop what runs, in the background and without
			// letting a second fatal log take the process down.
			s.level.stopping.Store(true)
			go func() {
				defer func() { _ = recover() }()
				_ = s.temporal.Stop()
			}()
		}
	}()

	const internalIP = "127.0.0.1"
	service := func(ip string, port int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: ip}}
	}
	internal := func(port int) string { return net.JoinHostPort(internalIP, strconv.Itoa(port)) }

	cfg := &config.Config{}
	cfg.Global.Membership = config.Membership{BroadcastAddress: internalIP}
	cfg.Persistence = config.Persistence{
		DefaultStore:    "sqlite",
		VisibilityStore: "sqlite",
		// One shard is plenty for one developer and keeps goroutines, memory
		// and SQLite contention low. It is fixed when the database is created.
		NumHistoryShards: 1,
		DataStores:       map[string]config.DataStore{"sqlite": {SQL: sqlCfg}},
	}
	cfg.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: s.frontendAddr},
		},
	}
	cfg.DCRedirectionPolicy.Policy = "noop"
	cfg.Services = map[string]config.Service{
		string(primitives.FrontendService): service(s.cfg.IP, ports.frontend),
		string(primitives.HistoryService):  service(internalIP, ports.history),
		string(primitives.MatchingService): service(internalIP, ports.matching),
		string(primitives.WorkerService):   service(internalIP, ports.worker),
	}
	cfg.Archival.History.State = "disabled"
	cfg.Archival.Visibility.State = "disabled"
	cfg.NamespaceDefaults.Archival.History.State = "disabled"
	cfg.NamespaceDefaults.Archival.Visibility.State = "disabled"
	// The system worker reaches the frontend through the public client.
	cfg.PublicClient.HostPort = s.frontendAddr

	dyn := dynamicconfig.StaticClient{
		// Mutable-state cache: 8k entries instead of 128k.
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key(): 8192,
		// History's task worker pools are sized for production hosts (512
		// goroutines per queue, ~2,900 goroutines in all). One shard writing
		// through a single SQLite connection needs a handful.
		dynamicconfig.TransferProcessorSchedulerWorkerCount.Key():               16,
		dynamicconfig.TimerProcessorSchedulerWorkerCount.Key():                  16,
		dynamicconfig.VisibilityProcessorSchedulerWorkerCount.Key():             16,
		dynamicconfig.ArchivalProcessorSchedulerWorkerCount.Key():               4,
		dynamicconfig.MemoryTimerProcessorSchedulerWorkerCount.Key():            4,
		dynamicconfig.ReplicationProcessorSchedulerWorkerCount.Key():            2, // single cluster: no replication
		dynamicconfig.ReplicationLowPriorityProcessorSchedulerWorkerCount.Key(): 2,
		// One partition per task queue: fewer pollers and goroutines, and no
		// forwarding between partitions for a single worker.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
		// The UI issues several visibility calls per page; the default is 10/s.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		dynamicconfig.NamespaceCacheRefreshInterval.Key():                nsCacheRefresh,
	}

	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: static.SingleLocalHost(s.frontendAddr),
			primitives.HistoryService:  static.SingleLocalHost(internal(ports.history)),
			primitives.MatchingService: static.SingleLocalHost(internal(ports.matching)),
			primitives.WorkerService:   static.SingleLocalHost(internal(ports.worker)),
		}),
		temporal.WithLogger(newTemporalLogger(s.log)),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return err
	}
	s.temporal = srv
	return srv.Start()
}

// awaitFrontend waits until the frontend answers, then brings the namespace's
// retention and search attributes in line with the configuration.
func (s *Server) awaitFrontend(ctx context.Context) error {
	var c client.Client
	var err error
	for {
		c, err = client.DialContext(ctx, client.Options{
			HostPort:  s.frontendAddr,
			Namespace: s.cfg.Namespace,
			Logger:    sdklog.NewStructuredLogger(s.log),
		})
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("frontend %s did not answer: %w", s.frontendAddr, err)
		case <-time.After(25 * time.Millisecond):
		}
	}
	defer c.Close()

	desc, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.cfg.Namespace})
	if err != nil {
		return fmt.Errorf("describe namespace %q: %w", s.cfg.Namespace, err)
	}
	if desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration() != s.cfg.Retention {
		_, err := c.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
			Namespace: s.cfg.Namespace,
			Config:    &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(s.cfg.Retention)},
		})
		if err != nil {
			return fmt.Errorf("set retention of namespace %q: %w", s.cfg.Namespace, err)
		}
	}
	return s.registerSearchAttributes(ctx, c)
}

// registerSearchAttributes adds the configured search attributes the
// namespace lacks. New namespaces got them when created, so this only does
// work when the set grew since the database was made.
func (s *Server) registerSearchAttributes(ctx context.Context, c client.Client) error {
	if len(s.cfg.SearchAttributes) == 0 {
		return nil
	}
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.cfg.Namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enums.IndexedValueType{}
	for name, typ := range s.cfg.SearchAttributes {
		got, ok := have.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = typ
		case got != typ:
			return fmt.Errorf("search attribute %q is registered as %v, configured as %v", name, got, typ)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        s.cfg.Namespace,
		SearchAttributes: missing,
	})
	if err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}

	// Services learn of new aliases on their next namespace cache refresh.
	// Wait until the frontend accepts a query on every new name, then one
	// refresh period more so that history has caught up too.
	for name := range missing {
		for {
			_, err := c.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{
				Namespace: s.cfg.Namespace,
				Query:     "`" + name + "` IS NOT NULL",
			})
			if err == nil {
				break
			}
			var invalid *serviceerror.InvalidArgument
			if !errors.As(err, &invalid) {
				return fmt.Errorf("check search attribute %q: %w", name, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("search attribute %q not usable yet: %w", name, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(nsCacheRefresh):
	}
	return nil
}

// Stop stops the UI and then the Temporal services, letting in-flight
// requests finish. Workers and clients should be stopped first. Calling Stop
// again returns the first result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		// Pollers and internal clients warn about every connection the
		// shutdown closes; only errors are news from here on.
		s.level.stopping.Store(true)
		if s.ui != nil {
			s.ui.stop()
		}
		s.stopErr = s.temporal.Stop()
	})
	return s.stopErr
}

// FrontendAddress is the host:port SDK clients and workers dial.
func (s *Server) FrontendAddress() string { return s.frontendAddr }

// UIAddress is the Web UI's host:port, or "" when the UI is disabled.
func (s *Server) UIAddress() string { return s.uiAddr }

// UIURL is the Web UI's base URL (http://host:port), or "" when disabled.
func (s *Server) UIURL() string {
	if s.uiAddr == "" {
		return ""
	}
	return "http://" + s.uiAddr
}

// Namespace is the namespace the server was started for.
func (s *Server) Namespace() string { return s.cfg.Namespace }

// DatabasePath is the SQLite file holding the server's state.
func (s *Server) DatabasePath() string { return s.dbPath }
