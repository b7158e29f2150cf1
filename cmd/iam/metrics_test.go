package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunAPI_MetricsOnTheirOwnAddress: with IAM_METRICS_ADDR, /metrics is
// served there and not on the API's listener; a bad address is refused.
func TestRunAPI_MetricsOnTheirOwnAddress(t *testing.T) {
	if _, err := loadConfig([]string{"IAM_METRICS_ADDR=9090"}); err == nil || !strings.Contains(err.Error(), "IAM_METRICS_ADDR") {
		t.Errorf("IAM_METRICS_ADDR without a port: %v, want refused", err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := free.Addr().String()
	if err = free.Close(); err != nil { // runAPI listens there
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "data")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, err := loadConfig([]string{"IAM_DATA_DIR=" + dataDir, "IAM_METRICS_ADDR=" + metricsAddr, "IAM_BOOTSTRAP_ADMIN_PASSWORD=a long admin password"})
	if err != nil {
		t.Fatal(err)
	}
	store, _, err := openAdminStore(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, store)
	secret, err := oauthSecret(cfg.OAuth, dataDir, true)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := newOAuthServer(cfg.OAuth, store, secret, "http://127.0.0.1:8080", log)
	if err != nil {
		t.Fatal(err)
	}
	apiAddr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runAPI(ctx, cfg, "127.0.0.1:0", store, nil, auth, nil, log, func(a net.Addr) { apiAddr <- a.String() })
	}()
	var api string
	select {
	case api = <-apiAddr:
	case err := <-done:
		t.Fatalf("runAPI: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the API did not start")
	}
	get := func(url string) (int, string) {
		t.Helper()
		for i := 0; ; i++ {
			resp, err := http.Get(url) //nolint:gosec // the test's own listeners
			if err != nil {
				if i < 100 {
					time.Sleep(20 * time.Millisecond) // the metrics listener may start a moment later
					continue
				}
				t.Fatalf("GET %s: %v", url, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if err = resp.Body.Close(); err != nil {
				t.Errorf("GET %s: %v", url, err)
			}
			return resp.StatusCode, string(body)
		}
	}
	if status, _ := get("http://" + api + "/healthz"); status != http.StatusOK {
		t.Fatalf("healthz: %d", status)
	}
	if status, body := get("http://" + api + "/metrics"); status != http.StatusNotFound {
		t.Errorf("/metrics on the API listener: %d %.200s, want 404", status, body)
	}
	status, body := get("http://" + metricsAddr + "/metrics")
	if status != http.StatusOK || !strings.Contains(body, `iam_http_requests_total{method="GET",route="/healthz",status="200"}`) {
		t.Errorf("/metrics on IAM_METRICS_ADDR: %d %.300s", status, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("runAPI after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("runAPI did not stop")
	}
}
