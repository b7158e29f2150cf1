package benchrun

import (
	"bytes"
	"context"
	"database/sql"
	"strings"
	"testing"

	"iam/models/dbtest/pgcluster"
)

// TestPrintStatements: on a cluster with StatementsConfig, the statements
// run since ResetStatements are printed, the costliest first, with their
// calls per operation; those before the reset are not.
func TestPrintStatements(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	ctx := context.Background()
	var start bytes.Buffer
	dsn, stop, err := Postgres(ctx, func(string) string { return "" },
		pgcluster.Options{Config: StatementsConfig, Prefix: "iam-benchrun-pg-"}, NewReport(&start))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if stopErr := stop(); stopErr != nil {
			t.Error(stopErr)
		}
	}()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if err := ResetStatements(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "SELECT 1 AS before_reset"); err != nil {
		t.Fatal(err)
	}
	if err := ResetStatements(ctx, db); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := db.ExecContext(ctx, "SELECT pg_sleep(0.002) AS slow"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "SELECT 1 AS fast"); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	PrintStatements(ctx, db, NewReport(&buf), 5, 5)
	out := buf.String()
	// pg_stat_statements prints constants as $1: the names tell them apart.
	slow, fast := strings.Index(out, "AS slow"), strings.Index(out, "AS fast")
	if slow < 0 || fast < 0 || slow > fast || strings.Contains(out, "before_reset") || strings.Contains(out, "pg_stat_statements:") {
		t.Fatalf("printed:\n%s", out)
	}
	if !strings.Contains(out, "statements: 4.00 per op") {
		t.Errorf("want 20 statements in 5 operations, printed:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "AS slow") && !strings.HasPrefix(strings.TrimSpace(line), "2.000 ") {
			t.Errorf("want 2 calls per op of the slow statement, printed %q", line)
		}
	}
}
