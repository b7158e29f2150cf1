package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"iam/models/dbtest"
	"iam/models/enrollment"
)

// otlpSpan is what the test collector keeps of an exported span.
type otlpSpan struct {
	service, trace, id, parent, name string
}

// otlpCollector is an OTLP/gRPC trace receiver of the test's own: the
// processes export to it as they would to an OpenTelemetry Collector.
type otlpCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []otlpSpan
}

func (c *otlpCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, otlpSpan{service: service, trace: hex.EncodeToString(s.GetTraceId()),
					id: hex.EncodeToString(s.GetSpanId()), parent: hex.EncodeToString(s.GetParentSpanId()), name: s.GetName()})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (c *otlpCollector) all() []otlpSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}

func startOTLPCollector(t *testing.T) (*otlpCollector, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &otlpCollector{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, c)
	go func() {
		// Serve returns nil once the cleanup's Stop ends it, ErrServerStopped
		// when that Stop came first.
		if err := srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("OTLP collector: %v", err)
		}
	}()
	t.Cleanup(srv.Stop)
	return c, ln.Addr().String()
}

// One upload is one trace: with OTEL_EXPORTER_OTLP_ENDPOINT set, the upload
// request's span (iam serve), its workflow start, and the workflow and
// activity spans on the worker (another process) share one trace id, and no
// worker span of the job is outside it. The job metrics reach the worker's
// /metrics and the API's.
func TestProduction_OneUploadIsOneTrace(t *testing.T) {
	t.Parallel()
	collector, collectorAddr := startOTLPCollector(t)
	dsn := dbtest.PostgresURL(t)
	e2eEmptySchema(t, dsn)
	dbEnv := []string{"IAM_DATABASE_URL=" + dsn}
	if code, _, errOut := e2eRun(t, "migrate-up", dbEnv, "migrate", "up"); code != 0 {
		t.Fatalf("iam migrate up exited %d: %s", code, errOut)
	}
	temporalAddr, namespace := e2eTemporal(t)
	healthAddr := fmt.Sprintf("127.0.0.1:%d", e2eFreeTCPPort(t))
	shape := e2eStartShape(t, dsn, temporalAddr, namespace,
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+collectorAddr,
		"OTEL_BSP_SCHEDULE_DELAY=100", // milliseconds: export at once
	)
	serve, apiAddr := shape.serve, shape.apiAddr
	w := shape.startWorkers(1, "IAM_HEALTH_ADDR="+healthAddr)[0]

	store := e2eOpenDB(t, dsn)
	org := e2eFirstOrg(t, store.Store)
	const rows, chunk = 30, 10
	e2eSeedFlowUsers(t, store, org, rows)
	token := e2eIssueToken(t, []string{"IAM_DATABASE_URL=" + dsn, "IAM_SECRET_KEY=" + e2eSecretKey}, e2eFlowScopes, "--user", e2eAdminEmail)
	jobID := e2eStartEnrollmentOf(t, apiAddr, token, rows, chunk)
	job := e2eWaitJob(t, store.Store, org, jobID, time.Minute, e2eFinished, serve, w)
	if job.Processed != rows {
		t.Fatalf("job %+v: want %d rows processed", job, rows)
	}

	// The trace: the upload's server span names the trace; the workflow's
	// spans on the worker join it.
	const uploadSpan = "POST /api/v1/protection/quick-enrollment/upload-csv"
	runWorkflow := "RunWorkflow:" + job.Kind
	var trace string
	e2eWaitFor(t, 30*time.Second, 50*time.Millisecond, "the spans of the upload reach the collector", func() (bool, string) {
		spans := collector.all()
		names := map[string][]string{}
		for _, s := range spans {
			if s.service == "iam-serve" && s.name == uploadSpan {
				trace = s.trace
			}
			names[s.service] = append(names[s.service], s.name)
		}
		if trace == "" {
			return false, fmt.Sprintf("no %q span of iam-serve yet; spans: %v", uploadSpan, names)
		}
		var sawStart, sawRun, sawActivity bool
		for _, s := range spans {
			if s.trace != trace {
				continue
			}
			sawStart = sawStart || (s.service == "iam-serve" && s.name == "StartWorkflow:"+job.Kind)
			sawRun = sawRun || (s.service == "iam-worker" && s.name == runWorkflow)
			sawActivity = sawActivity || (s.service == "iam-worker" && strings.HasPrefix(s.name, "RunActivity:"))
		}
		return sawStart && sawRun && sawActivity, fmt.Sprintf("in the upload's trace: StartWorkflow %v, %s %v, RunActivity %v; spans: %v",
			sawStart, runWorkflow, sawRun, sawActivity, names)
	}, serve, w)
	for _, s := range collector.all() {
		// The event hook supervisor's schedule (every minute, and once
		// when the worker starts) runs in traces of its own.
		if strings.Contains(s.name, "EventHook") {
			continue
		}
		if s.service == "iam-worker" && (s.name == runWorkflow || strings.HasPrefix(s.name, "RunActivity:")) && s.trace != trace {
			t.Errorf("worker span %q is in trace %s, not the upload's %s", s.name, s.trace, trace)
		}
	}

	// The worker's job metrics.
	metric := func(addr, name string) float64 {
		t.Helper()
		status, body := e2eHTTPGet("http://" + addr + "/metrics")
		if status != 200 {
			t.Fatalf("GET %s/metrics: %d %s", addr, status, body)
		}
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("%s/metrics has no %s:\n%s", addr, name, body)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	module := fmt.Sprintf(`{module=%q}`, enrollment.EnrollmentModule)
	if got := metric(healthAddr, "iam_job_rows_processed_total"+module); got != rows {
		t.Errorf("iam_job_rows_processed_total = %v, want %d", got, rows)
	}
	if got := metric(healthAddr, "iam_job_chunk_duration_seconds_count"+module); got < rows/chunk {
		t.Errorf("iam_job_chunk_duration_seconds_count = %v, want at least %d chunks", got, rows/chunk)
	}
	if got := metric(apiAddr, fmt.Sprintf(`iam_jobs{module=%q,status=%q}`, enrollment.EnrollmentModule, job.Status)); got != 1 {
		t.Errorf("iam_jobs of the job's module and status = %v, want 1", got)
	}
}
