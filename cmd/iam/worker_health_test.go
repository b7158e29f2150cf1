package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/store"
)

// A worker's probes (IAM_HEALTH_ADDR): /healthz answers while the process
// runs; /readyz answers 200 when the database and Temporal answer and 503,
// naming which one in a word and nothing more, when either does not.
func TestWorkerHealth_ReadyOnlyWhenDatabaseAndTemporalAnswer(t *testing.T) {
	if _, err := loadConfig([]string{"IAM_HEALTH_ADDR=8081"}); err == nil || !strings.Contains(err.Error(), "IAM_HEALTH_ADDR") {
		t.Errorf("IAM_HEALTH_ADDR without a port: %v, want refused", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	live, liveNS := apitest.TemporalAddress(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	if err := ln.Close(); err != nil { // nothing answers there
		t.Fatal(err)
	}
	temporalAt := func(addr, ns string) client.Client {
		c, err := client.NewLazyClient(client.Options{HostPort: addr, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	up := store.NewStore(dbtest.SQLite(t))
	closedDB := dbtest.SQLite(t)
	closed := store.NewStore(closedDB)
	if err := closedDB.Close(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name       string
		store      *store.Store
		tc         client.Client
		wantStatus int
		want       map[string]string
	}{
		{"both answer", up, temporalAt(live, liveNS), http.StatusOK, map[string]string{"database": "ok", "temporal": "ok"}},
		{"database down", closed, temporalAt(live, liveNS), http.StatusServiceUnavailable, map[string]string{"database": "unavailable", "temporal": "ok"}},
		{"temporal down", up, temporalAt(deadAddr, "default"), http.StatusServiceUnavailable, map[string]string{"database": "ok", "temporal": "unavailable"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := workerHealth(c.store, c.tc, prometheus.NewRegistry(), log)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("/healthz answered %d", rec.Code)
			}
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			var got struct {
				Ready  bool              `json:"ready"`
				Checks map[string]string `json:"checks"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("/readyz: %v: %s", err, rec.Body)
			}
			if rec.Code != c.wantStatus || got.Ready != (c.wantStatus == http.StatusOK) || len(got.Checks) != 2 ||
				got.Checks["database"] != c.want["database"] || got.Checks["temporal"] != c.want["temporal"] {
				t.Errorf("/readyz answered %d %s, want %d with %v", rec.Code, rec.Body, c.wantStatus, c.want)
			}
		})
	}
}
