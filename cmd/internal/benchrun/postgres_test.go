package benchrun

import (
	"bytes"
	"context"
	"database/sql"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the driver the benchmarks use

	"iam/models/dbtest/pgcluster"
)

// TestPostgres_GivenDatabase: IAM_BENCH_DATABASE_URL is used as it is, and
// nothing is started or stopped.
func TestPostgres_GivenDatabase(t *testing.T) {
	var buf bytes.Buffer
	const given = "postgres://bench@db.example:5432/iam"
	dsn, stop, err := Postgres(context.Background(), func(k string) string {
		if k == "IAM_BENCH_DATABASE_URL" {
			return given
		}
		return ""
	}, pgcluster.Options{}, NewReport(&buf))
	if err != nil || dsn != given || stop() != nil || buf.Len() != 0 {
		t.Fatalf("Postgres = %q, %v; report %q; want the given database and no cluster", dsn, err, buf.String())
	}
}

// TestPostgres_ThrowawayCluster: without one, a cluster is started, said
// in the report, answers at the returned address, and is gone after stop.
func TestPostgres_ThrowawayCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	ctx := context.Background()
	var buf bytes.Buffer
	dsn, stop, err := Postgres(ctx, func(string) string { return "" }, pgcluster.Options{Prefix: "iam-benchrun-pg-"}, NewReport(&buf))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "throwaway PostgreSQL cluster") {
		t.Errorf("report %q does not say which cluster", buf.String())
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("the cluster at %s: %v", dsn, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err == nil {
		t.Error("the cluster still answers after stop")
	}
}
