package dbtest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"iam/models/dbtest/pgcluster"
	"iam/models/sqldb"
)

// Cluster is a throwaway PostgreSQL cluster of one test's own, holding one
// migrated database, for tests that stop the server and start it again (an
// outage, a restart, a failover as the service sees them). The shared server
// of the other tests cannot be stopped, so these pay for a cluster of their
// own (about a second on a memory file system).
type Cluster struct {
	t   testing.TB
	c   *pgcluster.Cluster
	dsn string
}

// NewCluster starts a cluster for t, creates and migrates its database, and
// stops and removes the cluster when t ends. It skips t where there are no
// PostgreSQL server binaries (fails it under IAM_TEST_REQUIRE_POSTGRES), as
// Postgres does; IAM_TEST_DATABASE_URL does not apply, as its server may not
// be stopped.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Prefix: "iam-dbtest-outage-"})
	if errors.Is(err, pgcluster.ErrNoServer) {
		if os.Getenv(EnvRequirePostgres) != "" {
			t.Fatalf("dbtest: %v (and %s is set, so PostgreSQL tests may not be skipped)", err, EnvRequirePostgres)
		}
		t.Skipf("dbtest: skipping PostgreSQL test: %v", err)
	}
	if err != nil {
		t.Fatalf("dbtest: start a PostgreSQL cluster: %v", err)
	}
	cl := &Cluster{t: t, c: c}
	t.Cleanup(func() {
		if stopErr := c.Stop(); stopErr != nil {
			t.Errorf("dbtest: %v", stopErr)
		}
	})
	admin, err := sqldb.Open(ctx, c.URL("postgres").String())
	if err != nil {
		t.Fatalf("dbtest: connect to the cluster: %v\n%s", err, c.LogTail())
	}
	defer func() {
		if cerr := admin.Close(); cerr != nil {
			t.Error(cerr)
		}
	}()
	if _, err = admin.ExecContext(ctx, "CREATE DATABASE iam"); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	cl.dsn = c.URL("iam").String()
	db, err := sqldb.Open(ctx, cl.dsn)
	if err != nil {
		t.Fatalf("dbtest: connect to database iam: %v", err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := sqldb.MigrateUp(ctx, db); err != nil {
		t.Fatalf("dbtest: migrate database iam: %v", err)
	}
	return cl
}

// URL is the superuser URL of the cluster's migrated database.
func (cl *Cluster) URL() string { return cl.dsn }

// Stop stops the server the way an operator's restart or a failover does:
// it ends every session (SQLSTATE 57P01 to each) and refuses new ones until
// Start. With immediate, it stops at once instead, as a crash does: the
// connections just drop.
func (cl *Cluster) Stop(immediate bool) {
	cl.t.Helper()
	mode := "fast"
	if immediate {
		mode = "immediate"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.c.StopServer(ctx, mode); err != nil {
		cl.t.Fatalf("dbtest: %v\n%s", err, cl.c.LogTail())
	}
}

// Start starts the stopped server again on the same port and waits until it
// accepts connections.
func (cl *Cluster) Start() {
	cl.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.c.StartServer(ctx); err != nil {
		cl.t.Fatalf("dbtest: %v", err)
	}
}

// String describes the cluster, for logs.
func (cl *Cluster) String() string { return "PostgreSQL cluster " + cl.c.Describe() }
