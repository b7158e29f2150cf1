package main

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of pg_stat_statements' queries

	"iam/cmd/internal/benchrun"
	"iam/cmd/internal/iamproc"
	"iam/models/dbtest/pgcluster"
)

const (
	adminEmail    = "crud-admin@example.com"
	adminPassword = "crudbench-admin-password"                         //nolint:gosec // the admin of the benchmark's throwaway service
	secretKey     = "crudbench-secret-key-0123456789abcdef-0123456789" //nolint:gosec // the secret of the benchmark's throwaway service
)

// bench runs the builds on one cluster.
type bench struct {
	cfg  config
	pg   *pgcluster.Cluster
	work string
	out  *benchrun.Report
}

// measure runs one build once: a fresh database migrated by it, `iam
// serve` on it, the seed, the warm-up and the measured load.
func (b *bench) measure(ctx context.Context, bd *build, turn int) (_ *result, err error) {
	db := fmt.Sprintf("crud_%d_%s", turn+1, bd.name)
	if err = b.pgCommand(ctx, "createdb", db); err != nil {
		return nil, err
	}
	defer benchrun.Cleanup(&err, func() error { return b.pgCommand(context.WithoutCancel(ctx), "dropdb", db) })
	encKey := make([]byte, 32)
	_, _ = crand.Read(encKey) // crypto/rand.Read does not fail
	env := []string{"IAM_DATABASE_URL=" + b.pg.URL(db).String(), "IAM_SECRET_KEY=" + secretKey,
		"IAM_ENCRYPTION_KEY=" + hex.EncodeToString(encKey), "IAM_LOG_LEVEL=" + b.cfg.logLevel,
		"IAM_DATA_DIR=" + filepath.Join(b.work, "data-"+db),
		"IAM_BOOTSTRAP_ADMIN_EMAIL=" + adminEmail, "IAM_BOOTSTRAP_ADMIN_PASSWORD=" + adminPassword,
		// No Temporal: static groups and users start no workflow (serve's client is lazy).
		"IAM_TEMPORAL_ADDRESS=127.0.0.1:1"}
	if out, migrateErr := iamproc.Run(bd.bin, env, "migrate", "up"); migrateErr != nil {
		return nil, fmt.Errorf("migrate: %w\n%s", migrateErr, out)
	}
	port, err := iamproc.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	api, err := iamproc.Start(bd.bin, b.work, "serve", append(env, "IAM_HTTP_ADDR="+addr))
	if err != nil {
		return nil, err
	}
	defer api.Stop()
	base := "http://" + addr
	// /healthz, not /readyz: the benchmark runs no Temporal server.
	if err = iamproc.WaitFor(base+"/healthz", 2*time.Minute); err != nil {
		return nil, err
	}
	token, err := iamproc.Token(bd.bin, env, adminEmail, "svc.user.ALL", "svc.group.ALL")
	if err != nil {
		return nil, err
	}
	g := newGenerator(base, token, b.cfg.clients)

	began := time.Now()
	s, err := g.seed(ctx, b.cfg.users, b.cfg.groups, b.cfg.clients)
	if err != nil {
		return nil, err
	}
	b.out.Printf("turn %d, %-6s seeded %d users and %d groups in %.1f s\n", turn+1, bd.name, b.cfg.users, b.cfg.groups,
		time.Since(began).Seconds())
	clients := make([]*client, b.cfg.clients)
	for i := range clients {
		// The same steps for both builds of a turn.
		clients[i] = &client{g: g, mix: b.cfg.mix, id: i, rng: rand.New(rand.NewPCG(uint64(turn), uint64(i))), //nolint:gosec // the steps of a benchmark
			users: s.owned[i], groups: s.groups}
	}
	if b.cfg.warmup > 0 {
		if smp, _ := loop(ctx, clients, b.cfg.warmup); smp.errs > 0 {
			return nil, fmt.Errorf("warm-up: %d requests failed, the first: %w", smp.errs, smp.firstErr)
		}
	}

	var stmts *sql.DB
	if b.cfg.statements > 0 {
		if stmts, err = b.resetStatements(ctx, db); err != nil {
			return nil, err
		}
		defer benchrun.Cleanup(&err, stmts.Close)
	}
	var auditor *generator // nil: a build without the audit log, or no -poll
	if auditToken, tokenErr := iamproc.Token(bd.bin, env, adminEmail, "svc.audit.READ"); tokenErr == nil && b.cfg.poll > 0 {
		auditor = newGenerator(base, auditToken, 1)
	}
	pgPID := b.pg.PID()
	serve0, pg0, gen0 := iamproc.CPUTime(api.Pid()), iamproc.TreeCPU(pgPID), benchrun.SelfCPU()
	polls := make(chan int, 1)
	go func() { polls <- auditor.pollAudit(ctx, b.cfg.poll, b.cfg.duration) }()
	smp, elapsed := loop(ctx, clients, b.cfg.duration)
	polled := <-polls
	r := newResult(bd.name, smp, elapsed)
	r.serveCPU, r.pgCPU, r.genCPU = iamproc.CPUTime(api.Pid())-serve0, iamproc.TreeCPU(pgPID)-pg0, benchrun.SelfCPU()-gen0
	if err = ctx.Err(); err != nil {
		return nil, err
	}
	if smp.errs > 0 {
		return nil, fmt.Errorf("%d of %d requests failed, the first: %w", smp.errs, smp.errs+r.requests, smp.firstErr)
	}
	b.out.Printf("turn %d, %-6s %s\n", turn+1, bd.name, r.line())
	if polled > 0 {
		b.out.Printf("  the audit log polled %d times\n", polled)
	}
	b.out.Printf("  %s\n", r.byKind())
	if stmts != nil {
		benchrun.PrintStatements(ctx, stmts, b.out, b.cfg.statements, r.requests)
	}
	return r, nil
}

// pgCommand runs createdb or dropdb (or another client program taking a
// database name last) on the cluster.
func (b *bench) pgCommand(ctx context.Context, program, db string) error {
	out, err := b.pg.Command(ctx, program, "-h", "127.0.0.1", "-p", strconv.Itoa(b.pg.Port()), "-U", "postgres", db).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", program, db, err, out)
	}
	return nil
}

// resetStatements connects to db and empties pg_stat_statements (the
// cluster's counts: the other databases are idle).
func (b *bench) resetStatements(ctx context.Context, db string) (*sql.DB, error) {
	conn, err := sql.Open("pgx", b.pg.URL(db).String())
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(1)
	if err := benchrun.ResetStatements(ctx, conn); err != nil {
		return nil, errors.Join(err, conn.Close())
	}
	return conn, nil
}
