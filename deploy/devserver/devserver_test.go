package devserver_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"iam/deploy/devserver"
)

const taskQueue = "devserver-test"

var (
	jobKind  = temporal.NewSearchAttributeKeyKeyword("IamJobKind")
	rowCount = temporal.NewSearchAttributeKeyInt64("IamRowCount")
)

// greet calls one activity and returns its result.
func greet(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, "Hello", name).Get(ctx, &out)
	return out, err
}

func hello(_ context.Context, name string) (string, error) { return "hello " + name, nil }

// waitForSignal reports "waiting" to queries until the "proceed" signal
// arrives, then sleeps on a timer and returns the signal's value.
func waitForSignal(ctx workflow.Context) (string, error) {
	state := "waiting"
	if err := workflow.SetQueryHandler(ctx, "state", func() (string, error) { return state, nil }); err != nil {
		return "", err
	}
	var v string
	workflow.GetSignalChannel(ctx, "proceed").Receive(ctx, &v)
	state = "sleeping"
	if err := workflow.Sleep(ctx, time.Second); err != nil {
		return "", err
	}
	return "done " + v, nil
}

func testLogger() *slog.Logger {
	// Not t.Log: server goroutines may still log while the test winds down.
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func startServer(t *testing.T, cfg devserver.Config) *devserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	began := time.Now()
	srv, err := devserver.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("Start took %v (frontend %s, ui %s)", time.Since(began).Round(time.Millisecond), srv.FrontendAddress(), srv.UIURL())
	return srv
}

// startWorker dials the server and runs a worker with both workflows.
func startWorker(t *testing.T, srv *devserver.Server) (client.Client, worker.Worker) {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort:  srv.FrontendAddress(),
		Namespace: srv.Namespace(),
		Logger:    sdklog.NewStructuredLogger(testLogger()),
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(greet)
	w.RegisterWorkflow(waitForSignal)
	w.RegisterActivityWithOptions(hello, activity.RegisterOptions{Name: "Hello"})
	if err := w.Start(); err != nil {
		c.Close()
		t.Fatalf("worker: %v", err)
	}
	return c, w
}

// waitVisible polls visibility until query lists workflowID.
func waitVisible(t *testing.T, c client.Client, query, workflowID string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			t.Fatalf("list %q: %v", query, err)
		}
		for _, e := range resp.GetExecutions() {
			if e.GetExecution().GetWorkflowId() == workflowID {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("visibility query %q did not find %s", query, workflowID)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec // an address of the test's own server
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() {
		if closeErr := resp.Body.Close(); closeErr != nil {
			t.Errorf("GET %s: close: %v", url, closeErr)
		}
	}()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func TestServer_WorkflowVisibilityAndUI(t *testing.T) {
	srv := startServer(t, devserver.Config{
		DataDir: t.TempDir(),
		SearchAttributes: map[string]enums.IndexedValueType{
			jobKind.GetName():  enums.INDEXED_VALUE_TYPE_KEYWORD,
			rowCount.GetName(): enums.INDEXED_VALUE_TYPE_INT,
		},
		Logger: testLogger(),
	})
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	c, w := startWorker(t, srv)
	t.Cleanup(func() { w.Stop(); c.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    "greet-1",
		TaskQueue:             taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(jobKind.ValueSet("import"), rowCount.ValueSet(42)),
	}, greet, "dev")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil || out != "hello dev" {
		t.Fatalf("workflow result = %q, %v; want %q", out, err, "hello dev")
	}
	waitVisible(t, c, `IamJobKind = "import" AND IamRowCount = 42 AND ExecutionStatus = "Completed"`, "greet-1")

	// A port in use is an error from Start, not the end of the process.
	_, port, _ := net.SplitHostPort(srv.FrontendAddress())
	taken, _ := strconv.Atoi(port)
	if other, err := devserver.Start(ctx, devserver.Config{DataDir: t.TempDir(), FrontendPort: taken, DisableUI: true}); err == nil {
		_ = other.Stop()
		t.Fatalf("Start on the frontend port in use succeeded")
	} else {
		t.Logf("Start on a port in use: %v", err)
	}

	status, body := httpGet(t, srv.UIURL()+"/")
	if status != http.StatusOK || !strings.Contains(strings.ToLower(body), "<html") {
		t.Fatalf("GET / = %d, want 200 with the UI page; body starts %.200q", status, body)
	}
	status, body = httpGet(t, srv.UIURL()+"/api/v1/namespaces/"+srv.Namespace()+"/workflows")
	if status != http.StatusOK || !strings.Contains(body, `"greet-1"`) {
		t.Fatalf("UI API list = %d, want 200 listing greet-1; body %.500s", status, body)
	}
}

func TestServer_RestartKeepsNamespaceAndWorkflows(t *testing.T) {
	dir := t.TempDir()
	cfg := devserver.Config{
		DataDir:          dir,
		SearchAttributes: map[string]enums.IndexedValueType{jobKind.GetName(): enums.INDEXED_VALUE_TYPE_KEYWORD},
		Logger:           testLogger(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// First life: start a workflow that blocks on a signal.
	srv := startServer(t, cfg)
	c, w := startWorker(t, srv)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    "waiter-1",
		TaskQueue:             taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(jobKind.ValueSet("restart")),
	}, waitForSignal)
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	waitQuery(t, c, run.GetID(), "waiting")
	w.Stop()
	c.Close()
	if err = srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	// Second life on the same data, with one more search attribute and a
	// longer retention.
	cfg.SearchAttributes = map[string]enums.IndexedValueType{
		jobKind.GetName():  enums.INDEXED_VALUE_TYPE_KEYWORD,
		rowCount.GetName(): enums.INDEXED_VALUE_TYPE_INT,
	}
	cfg.Retention = 10 * 24 * time.Hour
	srv = startServer(t, cfg)
	t.Cleanup(func() {
		if stopErr := srv.Stop(); stopErr != nil {
			t.Errorf("Stop: %v", stopErr)
		}
	})
	c, w = startWorker(t, srv)
	t.Cleanup(func() { w.Stop(); c.Close() })

	ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: srv.Namespace()})
	if err != nil {
		t.Fatalf("describe namespace: %v", err)
	}
	if got := ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(); got < 7*24*time.Hour || got != cfg.Retention {
		t.Fatalf("retention = %v, want %v (>= 7 days)", got, cfg.Retention)
	}
	sas, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: srv.Namespace()})
	if err != nil {
		t.Fatalf("list search attributes: %v", err)
	}
	for name, typ := range cfg.SearchAttributes {
		if got := sas.GetCustomAttributes()[name]; got != typ {
			t.Errorf("search attribute %s = %v, want %v", name, got, typ)
		}
	}

	// The workflow from the first life carries on.
	if err = c.SignalWorkflow(ctx, "waiter-1", "", "proceed", "after restart"); err != nil {
		t.Fatalf("signal: %v", err)
	}
	var out string
	if err = c.GetWorkflow(ctx, "waiter-1", "").Get(ctx, &out); err != nil || out != "done after restart" {
		t.Fatalf("workflow result = %q, %v; want %q", out, err, "done after restart")
	}
	waitVisible(t, c, `IamJobKind = "restart" AND ExecutionStatus = "Completed"`, "waiter-1")

	// The search attribute added on restart is usable right away.
	run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    "greet-2",
		TaskQueue:             taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(rowCount.ValueSet(7)),
	}, greet, "again")
	if err != nil {
		t.Fatalf("start workflow with the new search attribute: %v", err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("greet-2: %v", err)
	}
	waitVisible(t, c, "IamRowCount = 7", "greet-2")
}

func waitQuery(t *testing.T, c client.Client, workflowID, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var got string
		v, err := c.QueryWorkflow(context.Background(), workflowID, "", "state")
		if err == nil {
			err = v.Get(&got)
		}
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("query state = %q, %v; want %q", got, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
