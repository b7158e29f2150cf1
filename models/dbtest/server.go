package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun"

	"iam/models/dbtest/pgcluster"
	"iam/models/sqldb"
)

var (
	pgOnce sync.Once
	pgSrv  *pgServer
	pgErr  error
)

// pgServer is the PostgreSQL server the tests of this process use: either the
// one named by IAM_TEST_DATABASE_URL or a throwaway cluster.
type pgServer struct {
	base     *url.URL // superuser URL; its path is replaced per database
	admin    *bun.DB  // connected to base's own database
	template string   // the migrated template database
	prefix   string   // prefix of the databases this process creates
	seq      atomic.Int64
	cluster  *pgcluster.Cluster // nil for an external server
	version  string
	// strategy is the CREATE DATABASE clause that copies the template
	// fastest. Copying its files (FILE_COPY) costs two checkpoints, cheap
	// only without fsync, as on the throwaway cluster: there it is about
	// twice as fast as writing the template to the WAL (WAL_LOG, the default
	// since PostgreSQL 15, the first version with the clause); on a durable
	// server it is several times slower.
	strategy string
}

// startServer connects to IAM_TEST_DATABASE_URL or starts a cluster, then
// builds the migrated template database.
func startServer() (srv *pgServer, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	suffix := randomHex(4)
	srv = &pgServer{prefix: "iam_test_" + suffix}
	if raw := os.Getenv(EnvDatabaseURL); raw != "" {
		var u *url.URL
		u, err = url.Parse(raw)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return nil, fmt.Errorf("%s must be a postgres:// URL, got %q", EnvDatabaseURL, redact(raw))
		}
		srv.base = u
		// Other test processes may share the server: names must not collide.
		srv.template = "iam_template_" + suffix
	} else {
		var c *pgcluster.Cluster
		if c, err = pgcluster.Start(ctx, pgcluster.Options{Prefix: "iam-dbtest-pg-"}); err != nil {
			if errors.Is(err, pgcluster.ErrNoServer) {
				err = fmt.Errorf("%w, or set %s to a superuser URL", err, EnvDatabaseURL)
			}
			return nil, err
		}
		srv.cluster = c
		srv.base = c.URL("postgres")
		srv.template = "iam_template"
	}
	defer func() {
		if err != nil {
			if srv.admin != nil {
				if closeErr := srv.admin.Close(); closeErr != nil {
					err = fmt.Errorf("%w; then closing the connection: %w", err, closeErr)
				}
			}
			if srv.cluster != nil {
				if stopErr := srv.cluster.Stop(); stopErr != nil {
					err = fmt.Errorf("%w; then stopping it: %w", err, stopErr)
				}
			}
		}
	}()

	srv.admin, err = sqldb.Open(ctx, srv.base.String())
	if err != nil {
		return srv, srv.withLog(fmt.Errorf("connect to %s: %w", redact(srv.base.String()), err))
	}
	srv.admin.SetMaxOpenConns(8)
	var versionNum int
	var fsync string
	if err := srv.admin.NewRaw("SELECT current_setting('server_version'), current_setting('server_version_num')::int, current_setting('fsync')").
		Scan(ctx, &srv.version, &versionNum, &fsync); err != nil {
		return srv, srv.withLog(fmt.Errorf("query server settings: %w", err))
	}
	if versionNum >= 150000 && fsync == "off" {
		srv.strategy = "STRATEGY FILE_COPY"
	}
	if err := srv.createTemplate(ctx); err != nil {
		return srv, srv.withLog(err)
	}
	return srv, nil
}

// createTemplate creates the template database and migrates it. Nothing may
// stay connected to it afterwards, or copying it fails.
func (s *pgServer) createTemplate(ctx context.Context) error {
	if _, err := s.admin.ExecContext(ctx, "CREATE DATABASE ?", bun.Ident(s.template)); err != nil {
		return fmt.Errorf("create template database %s: %w", s.template, err)
	}
	db, err := sqldb.Open(ctx, s.urlOf(s.template))
	if err != nil {
		return fmt.Errorf("connect to template database %s: %w", s.template, err)
	}
	_, migErr := sqldb.MigrateUp(ctx, db)
	closeErr := db.Close()
	if migErr != nil {
		return fmt.Errorf("migrate template database %s: %w", s.template, migErr)
	}
	if closeErr != nil {
		return fmt.Errorf("close template database %s: %w", s.template, closeErr)
	}
	return nil
}

// createDatabase copies the template into a new database of a unique name.
func (s *pgServer) createDatabase(ctx context.Context) (name, dsn string, err error) {
	name = fmt.Sprintf("%s_%d", s.prefix, s.seq.Add(1))
	if _, err := s.admin.ExecContext(ctx, "CREATE DATABASE ? TEMPLATE ? ?",
		bun.Ident(name), bun.Ident(s.template), bun.Safe(s.strategy)); err != nil {
		return "", "", s.withLog(fmt.Errorf("create database %s from template %s: %w", name, s.template, err))
	}
	return name, s.urlOf(name), nil
}

// dropDatabase drops a database, disconnecting its sessions first.
func (s *pgServer) dropDatabase(ctx context.Context, name string) error {
	_, err := s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS ? WITH (FORCE)", bun.Ident(name))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42601" {
		// Before PostgreSQL 13 there is no FORCE: end the sessions by hand.
		if _, err = s.admin.ExecContext(ctx,
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()", name); err != nil {
			return err
		}
		_, err = s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS ?", bun.Ident(name))
	}
	return err
}

// close drops the template of an external server, disconnects, and stops the
// cluster this process started.
func (s *pgServer) close() error {
	var errs []error
	if s.cluster == nil && s.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := s.dropDatabase(ctx, s.template); err != nil {
			errs = append(errs, fmt.Errorf("drop template database %s: %w", s.template, err))
		}
		cancel()
	}
	if s.admin != nil {
		if err := s.admin.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close admin connection: %w", err))
		}
	}
	if s.cluster != nil {
		if err := s.cluster.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// shutdown releases the server of this process, if one was started.
func shutdown() error {
	pgOnce.Do(func() {}) // no test started one, and none may start one now
	var err error
	if pgSrv != nil {
		err = pgSrv.close()
		pgSrv = nil
	}
	return err
}

// urlOf returns the URL of database name on the server.
func (s *pgServer) urlOf(name string) string {
	u := *s.base
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

// withLog adds the tail of the cluster's log to err, if this process runs
// the cluster.
func (s *pgServer) withLog(err error) error {
	if s.cluster == nil {
		return err
	}
	return fmt.Errorf("%w\n%s", err, s.cluster.LogTail())
}

func (s *pgServer) describe() string {
	where := "server from " + EnvDatabaseURL + " " + redact(s.base.String())
	if s.cluster != nil {
		where = "throwaway cluster " + s.cluster.Describe()
	}
	return fmt.Sprintf("PostgreSQL %s, %s", s.version, where)
}

// redact hides the password of a URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}
