package api_test

import (
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"go.temporal.io/sdk/client"

	"iam/api"
	"iam/models/store"
)

// TestReadyz_SaysWhatFailedNotWhy: with the database and Temporal down,
// /readyz answers 503 naming each as unavailable, without the errors' text
// (which names the database user, database and hosts).
func TestReadyz_SaysWhatFailedNotWhy(t *testing.T) {
	sqldb, err := sql.Open("pgx", "postgres://secretuser:secretpw@127.0.0.1:1/secretdb?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	db := bun.NewDB(sqldb, pgdialect.New())
	t.Cleanup(func() {
		if cerr := db.Close(); cerr != nil {
			t.Error(cerr)
		}
	})
	tc, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Logger: nopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	s := api.New(api.Config{}, api.Deps{Store: store.NewStore(db), Temporal: tc, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close() // only read: a close error tells the test nothing
	var got struct {
		Ready  bool              `json:"ready"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || got.Ready || got.Checks["database"] != "unavailable" || got.Checks["temporal"] != "unavailable" {
		t.Errorf("readyz: %d %s", resp.StatusCode, body)
	}
	for _, leak := range []string{"secretuser", "secretdb", "127.0.0.1", "connect", "dial"} {
		if strings.Contains(string(body), leak) {
			t.Errorf("readyz shows %q: %s", leak, body)
		}
	}
}

type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}
