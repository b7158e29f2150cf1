package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"iam/api"
	"iam/api/auth"
	"iam/api/jobrun"
	"iam/cmd/internal/benchrun"
	"iam/deploy/devserver"
	devicesmodel "iam/models/devices"
	"iam/models/identity"
	"iam/models/management"
	"iam/models/sqldb"
	"iam/models/store"
	"iam/worker"
	"iam/workflows"
)

// bench holds one run: the database, the two organizations (A through the
// API, B by plain SQL), the API with its worker and Temporal server.
type bench struct {
	users    int
	db       *bun.DB
	store    *store.Store
	a, b     *identity.Organization
	adminA   int64
	temporal *devserver.Server
	tc       client.Client
	worker   sdkworker.Worker
	srv      *httptest.Server
	// statements is how many of an API run's costliest statements to print.
	statements int
	// cpuProfile, when set, is the prefix of the CPU profile written for
	// each API run (<prefix>-<action>.pprof): the API, the worker and the
	// Temporal server all run in this process.
	cpuProfile string
}

type pair struct {
	name       string
	api, plain time.Duration
	note       string
}

const token = "mgmtbench"

type benchTokens struct{ orgID, userID int64 }

// ValidateAccessToken accepts the benchmark token as organization A's
// administrator.
func (t benchTokens) ValidateAccessToken(_ context.Context, tok string) (*auth.Principal, error) {
	if tok != token {
		return nil, errors.New("unknown token")
	}
	return &auth.Principal{UserID: t.userID, OrgID: t.orgID, Scopes: []string{"svc.management.all", "svc.job.READ"}}, nil
}

func newBench(ctx context.Context, dsn, work string, users int) (*bench, error) {
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if _, err = sqldb.MigrateUp(ctx, db); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	b := &bench{users: users, db: db, store: store.NewStore(db)}
	b.temporal, err = devserver.Start(ctx, devserver.Config{DataDir: filepath.Join(work, "temporal"), DisableUI: true,
		SearchAttributes: workflows.SearchAttributes()})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("temporal: %w", err), db.Close())
	}
	b.tc, err = client.Dial(client.Options{HostPort: b.temporal.FrontendAddress(), Namespace: b.temporal.Namespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return nil, errors.Join(err, b.close())
	}
	b.worker = worker.New(b.tc, worker.Deps{Store: b.store})
	if err := b.worker.Start(); err != nil {
		return nil, errors.Join(err, b.close())
	}
	return b, nil
}

// close stops what newBench and seed started and closes the database.
func (b *bench) close() error {
	if b.srv != nil {
		b.srv.Close()
	}
	if b.worker != nil {
		b.worker.Stop()
	}
	if b.tc != nil {
		b.tc.Close()
	}
	var err error
	if b.temporal != nil {
		err = b.temporal.Stop()
	}
	return errors.Join(err, b.db.Close())
}

// seed makes the two organizations alike and starts the API for A.
func (b *bench) seed(ctx context.Context) error {
	t0 := time.Now()
	for i, org := range []**identity.Organization{&b.a, &b.b} {
		*org = &identity.Organization{Name: fmt.Sprintf("mgmtbench %c", 'A'+i)}
		if err := b.store.Orgs.Create(ctx, *org); err != nil {
			return err
		}
		admin := &identity.User{OrgID: (*org).ID, Email: "admin@corp.test", Role: identity.RoleAdmin, Status: identity.UserActive}
		if err := b.store.Users.Create(ctx, admin, ""); err != nil {
			return err
		}
		if i == 0 {
			b.adminA = admin.ID
		}
		configs, err := b.store.Factors.List(ctx, (*org).ID)
		if err != nil || len(configs) == 0 {
			return fmt.Errorf("factor configs: %w", err)
		}
		if err := seedOrg(ctx, b.db, (*org).ID, configs[0].ID, b.users); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	for _, t := range []string{"users", "group_members", "enrollments", "oauth_tokens", "device_accounts", "groups", "devices"} {
		if _, err := b.db.ExecContext(ctx, "VACUUM (ANALYZE) "+t); err != nil {
			return err
		}
	}
	fmt.Printf("seeded 2 × %d users (2 memberships, an enrollment, 2 tokens each; %d linked device accounts) in %s\n",
		b.users, b.users/100, time.Since(t0).Round(time.Millisecond))
	launcher := &jobrun.Launcher{Client: b.tc, Store: b.store, Log: slog.New(slog.DiscardHandler)}
	server := api.New(api.Config{}, api.Deps{Store: b.store, Temporal: b.tc, Jobs: launcher,
		Tokens: benchTokens{orgID: b.a.ID, userID: b.adminA}, Log: slog.New(slog.DiscardHandler)})
	b.srv = httptest.NewServer(server.Handler())
	return nil
}

// seedOrg COPYs n users user1..n@example.com of org, department Bench, each
// a member of a static group and of a dynamic group (department eq
// "Bench"), with an enrollment and an access and a refresh token; every
// 100th is linked to a local account of one of 100 devices.
func seedOrg(ctx context.Context, db *bun.DB, orgID, cfgID int64, n int) (err error) {
	now := time.Now().UTC()
	static, dynamic := sqldb.NewID(), sqldb.NewID()
	if _, err = db.ExecContext(ctx, `INSERT INTO groups (id, org_id, name, is_dynamic, membership_rule, when_created, updated_at)
		VALUES (?, ?, 'Static', FALSE, '', ?, ?), (?, ?, 'Dynamic', TRUE, 'department eq "Bench"', ?, ?)`,
		static, orgID, now, now, dynamic, orgID, now, now); err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	client := fmt.Sprintf("bench-%d", orgID)
	if _, err = db.ExecContext(ctx, `INSERT INTO oauth_clients (id, org_id, name, type, redirect_uris, created_at)
		VALUES (?, ?, 'bench', 'confidential', '[]', ?)`, client, orgID, now); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	devices := make([]int64, 100)
	for i := range devices {
		devices[i] = sqldb.NewID()
		if _, err = db.ExecContext(ctx, `INSERT INTO devices (id, org_id, platform, name, checkin_interval_seconds,
			agent_installed_time, date_added, updated_at) VALUES (?, ?, 'windows', ?, 300, ?, ?, ?)`,
			devices[i], orgID, fmt.Sprintf("PC-%03d", i), now, now, now); err != nil {
			return fmt.Errorf("device: %w", err)
		}
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = sqldb.NewID()
	}
	conn, err := db.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, conn.Close) // back to the pool
	copyRows := func(table string, cols []string, rows int, row func(int) []any) error {
		return conn.Raw(func(dc any) error {
			pc := dc.(*stdlib.Conn).Conn()
			i := 0
			_, copyErr := pc.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromFunc(func() ([]any, error) {
				if i == rows {
					return nil, nil
				}
				i++
				return row(i - 1), nil
			}))
			if copyErr != nil {
				return fmt.Errorf("copy %s: %w", table, copyErr)
			}
			return nil
		})
	}
	if err = copyRows("users", []string{"id", "org_id", "first_name", "last_name", "email", "department", "status", "created_at", "updated_at"}, n,
		func(i int) []any {
			return []any{ids[i], orgID, "First", fmt.Sprint("Last", i), fmt.Sprintf("user%d@example.com", i+1), "Bench", identity.UserActive, now, now}
		}); err != nil {
		return err
	}
	if err = copyRows("group_members", []string{"group_id", "user_id", "org_id"}, 2*n, func(i int) []any {
		if i < n {
			return []any{static, ids[i], orgID}
		}
		return []any{dynamic, ids[i-n], orgID}
	}); err != nil {
		return err
	}
	if err = copyRows("enrollments", []string{"org_id", "user_id", "factor_config_id", "factor_type", "value", "updated_at"}, n,
		func(i int) []any { return []any{orgID, ids[i], cfgID, "SMS_OTP", fmt.Sprintf("+1415%07d", i), now} }); err != nil {
		return err
	}
	if err = copyRows("oauth_tokens", []string{"kind", "signature", "seq", "request_id", "org_id", "client_id", "user_id", "requested_at", "session"}, 2*n,
		func(i int) []any {
			kind := "access"
			if i >= n {
				kind = "refresh"
			}
			return []any{kind, fmt.Sprintf("sig-%d-%d", orgID, i), int64(i), fmt.Sprintf("req-%d-%d", orgID, i%n), orgID, client, ids[i%n], now, "{}"}
		}); err != nil {
		return err
	}
	if err = copyRows("device_accounts", []string{"id", "org_id", "device_id", "user_name", "permission_level", "link_status", "link_type",
		"linked_at", "idp_user_id", "link_permission_level", "created_at", "updated_at"}, n/100,
		func(i int) []any {
			return []any{sqldb.NewID(), orgID, devices[i%100], fmt.Sprintf("user%d", i*100+1), "standard", devicesmodel.LinkLinked, "manual",
				now, ids[i*100], "standard", now, now}
		}); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `UPDATE groups SET members_count = (SELECT count(*) FROM group_members m WHERE m.group_id = groups.id) WHERE org_id = ?`, orgID)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `UPDATE devices SET total_local_accounts = (SELECT count(*) FROM device_accounts a WHERE a.device_id = devices.id),
		linked_local_accounts = (SELECT count(*) FROM device_accounts a WHERE a.device_id = devices.id AND a.link_status = ?) WHERE org_id = ?`,
		devicesmodel.LinkLinked, orgID)
	return err
}

const benchFilter = `email ew "@example.com"`

// throughAPI executes the action on A's seeded users and waits for the
// execution to finish; it returns the wall time and the final execution.
func (b *bench) throughAPI(ctx context.Context, action string, body map[string]any) (time.Duration, map[string]any, error) {
	body["filter"] = benchFilter
	raw, _ := json.Marshal(body)
	if b.statements > 0 {
		if err := benchrun.ResetStatements(ctx, b.db.DB); err != nil {
			return 0, nil, err
		}
		defer benchrun.PrintStatements(ctx, b.db.DB, benchrun.NewReport(os.Stdout), b.statements, 0)
	}
	if b.cpuProfile != "" {
		stop, err := startCPUProfile(b.cpuProfile + "-" + action + ".pprof")
		if err != nil {
			return 0, nil, err
		}
		defer stop()
	}
	base := b.srv.URL + "/api/v1/management/actions/" + action
	began := time.Now()
	var acc struct {
		Data struct {
			ExecutionID int64 `json:"execution_id"`
		} `json:"data"`
	}
	if err := b.call(ctx, "POST", base+"/execute", raw, http.StatusAccepted, &acc); err != nil {
		return 0, nil, err
	}
	path := fmt.Sprintf("%s/executions/%d", base, acc.Data.ExecutionID)
	last := ""
	for {
		var st struct{ Data string }
		if err := b.call(ctx, "GET", path+"/status", nil, http.StatusOK, &st); err != nil {
			return 0, nil, err
		}
		if management.ExecutionStatus(st.Data).Finished() {
			el := time.Since(began)
			var exec struct{ Data map[string]any }
			err := b.call(ctx, "GET", path, nil, http.StatusOK, &exec)
			return el, exec.Data, err
		}
		if st.Data != last {
			fmt.Printf("  [%s] %5.1f s %s\n", action, time.Since(began).Seconds(), st.Data)
			last = st.Data
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startCPUProfile writes this process's CPU profile to path until the
// returned stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path) //nolint:gosec // the path the command line names
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "mgmtbench: cpu profile:", err)
		}
	}, nil
}

func (b *bench) call(ctx context.Context, method, url string, body []byte, want int, out any) (err error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", auth.Scheme+" "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, resp.Body.Close()) }()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}

// move moves the users turns times, through the API and plainly by turns,
// to another container each time, and sums the times of each side (a shared
// machine's load then weighs on both alike).
func (b *bench) move(ctx context.Context, turns int) (pair, error) {
	p := pair{name: "move"}
	for turn := 1; turn <= turns; turn++ {
		target := fmt.Sprintf("OU=Moved-%d,DC=example,DC=com", turn)
		fmt.Printf("moving %d users through the API (turn %d of %d) ...\n", b.users, turn, turns)
		took, exec, err := b.throughAPI(ctx, "move-users", map[string]any{"target_container": target})
		if err != nil {
			return p, err
		}
		if exec["status"] != "completed" || exec["success_count"] != float64(b.users) {
			return p, fmt.Errorf("the move ended %v with %v succeeded", exec["status"], exec["success_count"])
		}
		p.api += took
		fmt.Printf("moving %d users with a plain UPDATE (%.2f s through the API) ...\n", b.users, took.Seconds())
		began := time.Now()
		res, err := b.db.ExecContext(ctx, "UPDATE users SET container = ?, updated_at = ? WHERE org_id = ? AND email LIKE '%@example.com'",
			target, time.Now().UTC(), b.b.ID)
		if err != nil {
			return p, err
		}
		took = time.Since(began)
		p.plain += took
		fmt.Printf("  plain UPDATE %.2f s\n", took.Seconds())
		if n, _ := res.RowsAffected(); n != int64(b.users) {
			return p, fmt.Errorf("the UPDATE moved %d users", n)
		}
		if err := b.same(ctx, "container = '"+target+"'"); err != nil {
			return p, err
		}
	}
	p.api /= time.Duration(turns)
	p.plain /= time.Duration(turns)
	p.note = fmt.Sprintf("mean of %d turns; API: execute (filter) → status completed, per-user and job results written; plain: one UPDATE", turns)
	return p, nil
}

func (b *bench) delete(ctx context.Context) (pair, error) {
	p := pair{name: "delete"}
	fmt.Printf("deleting %d users through the API ...\n", b.users)
	var exec map[string]any
	var err error
	if p.api, exec, err = b.throughAPI(ctx, "delete-users", map[string]any{}); err != nil {
		return p, err
	}
	if exec["status"] != "completed" || exec["success_count"] != float64(b.users) {
		return p, fmt.Errorf("the delete ended %v with %v succeeded", exec["status"], exec["success_count"])
	}
	fmt.Printf("deleting %d users with a plain set-based DELETE ...\n", b.users)
	began := time.Now()
	if err := plainDelete(ctx, b.db, b.b.ID); err != nil {
		return p, err
	}
	p.plain = time.Since(began)
	p.note = "API: execute (filter) → status completed; plain: one transaction (device accounts unlinked with history and commands, devices recounted, managers cleared, one DELETE cascading to memberships, enrollments, tokens)"
	return p, b.same(ctx, "")
}

// plainDelete deletes org's seeded users with set-based statements in one
// transaction, with the cascades the product's delete has.
func plainDelete(ctx context.Context, db *bun.DB, orgID int64) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		now := time.Now().UTC()
		sel := "SELECT id FROM users WHERE org_id = ? AND email LIKE '%@example.com'"
		stmts := []struct {
			q    string
			args []any
		}{
			{`INSERT INTO device_link_history (id, org_id, device_id, device_name, account_id, user_name, idp_user_id, action, link_type,
				old_state, new_state, reason, actor, created_at)
			  SELECT -a.id, a.org_id, a.device_id, d.name, a.id, a.user_name, a.idp_user_id, 'user_deleted', a.link_type, a.link_status,
				?, 'the user was deleted', 'system', ?
			  FROM device_accounts a JOIN devices d ON d.id = a.device_id WHERE a.org_id = ? AND a.idp_user_id IN (` + sel + `)`,
				[]any{devicesmodel.LinkUnlinked, now, orgID, orgID}},
			{`INSERT INTO device_commands (id, org_id, device_id, account_id, type, args, status, created_at)
			  SELECT -a.id, a.org_id, a.device_id, a.id, ?, json_build_object('account_id', a.id::text, 'user_name', a.user_name), ?, ?
			  FROM device_accounts a WHERE a.org_id = ? AND a.link_status = ? AND a.idp_user_id IN (` + sel + `)`,
				[]any{devicesmodel.CmdUnlink, devicesmodel.CommandPending, now, orgID, devicesmodel.LinkLinked, orgID}},
			{`UPDATE device_accounts SET link_status = ?, link_type = '', idp_user_id = NULL, link_permission_level = '',
				link_command_id = NULL, linked_at = NULL, updated_at = ? WHERE org_id = ? AND idp_user_id IN (` + sel + `)`,
				[]any{devicesmodel.LinkUnlinked, now, orgID, orgID}},
			{`UPDATE devices SET linked_local_accounts = (SELECT count(*) FROM device_accounts a WHERE a.device_id = devices.id AND a.link_status = ?)
			  WHERE org_id = ?`, []any{devicesmodel.LinkLinked, orgID}},
			{`UPDATE users SET manager_id = NULL WHERE org_id = ? AND manager_id IN (` + sel + `)`, []any{orgID, orgID}},
			{`DELETE FROM users WHERE org_id = ? AND email LIKE '%@example.com'`, []any{orgID}},
		}
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s.q, s.args...); err != nil {
				return fmt.Errorf("%.60s…: %w", s.q, err)
			}
		}
		return nil
	})
}

// same checks that A and B agree: the users (matching where, or none when
// where is empty), memberships, enrollments, tokens, linked accounts,
// group and device counts.
func (b *bench) same(ctx context.Context, where string) error {
	count := func(q string, org int64) (int64, error) {
		var n int64
		err := b.db.QueryRowContext(ctx, q, org).Scan(&n)
		return n, err
	}
	checks := []string{
		"SELECT count(*) FROM group_members WHERE org_id = ?",
		"SELECT count(*) FROM enrollments WHERE org_id = ?",
		"SELECT count(*) FROM oauth_tokens WHERE org_id = ?",
		"SELECT count(*) FROM device_accounts WHERE org_id = ? AND link_status = 'linked'",
		"SELECT count(*) FROM device_commands WHERE org_id = ?",
		"SELECT COALESCE(sum(members_count), 0) FROM groups WHERE org_id = ?",
		"SELECT COALESCE(sum(linked_local_accounts), 0) FROM devices WHERE org_id = ?",
	}
	if where != "" {
		checks = append(checks, "SELECT count(*) FROM users WHERE org_id = ? AND "+where)
	} else {
		checks = append(checks, "SELECT count(*) FROM users WHERE org_id = ? AND email LIKE '%@example.com'")
	}
	for _, q := range checks {
		na, err := count(q, b.a.ID)
		if err != nil {
			return err
		}
		nb, err := count(q, b.b.ID)
		if err != nil {
			return err
		}
		if na != nb {
			return fmt.Errorf("%s: %d through the API, %d plain", q, na, nb)
		}
	}
	return nil
}
