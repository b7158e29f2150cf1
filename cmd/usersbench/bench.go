package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"iam/api"
	"iam/api/auth"
	"iam/cmd/internal/benchrun"
	"iam/models/identity"
	"iam/models/listing"
	"iam/models/sqldb"
	"iam/models/store"
)

// bench holds one run: the database, the organization of the seeded users
// and the API serving them.
type bench struct {
	cfg    config
	out    *benchrun.Report
	db     *bun.DB
	store  *store.Store
	org    *identity.Organization
	srv    *httptest.Server
	client *http.Client
	hook   *captureHook
}

// token is the one access token the benchmark's API accepts.
const token = "usersbench"

type benchTokens struct{ orgID int64 }

// ValidateAccessToken accepts the benchmark token for the seeded organization.
func (t benchTokens) ValidateAccessToken(_ context.Context, tok string) (*auth.Principal, error) {
	if tok != token {
		return nil, errors.New("unknown token")
	}
	return &auth.Principal{UserID: 1, OrgID: t.orgID, Scopes: []string{"svc.user.READ"}}, nil
}

func newBench(ctx context.Context, dsn string, cfg config, out *benchrun.Report) (*bench, error) {
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if !sqldb.IsPostgres(db) {
		return nil, errors.Join(errors.New("the benchmark needs PostgreSQL"), db.Close())
	}
	db.SetMaxOpenConns(cfg.concurrency + 8)
	db.SetMaxIdleConns(cfg.concurrency + 8)
	if _, err := sqldb.MigrateUp(ctx, db); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	hook := &captureHook{}
	db = db.WithQueryHook(hook)
	b := &bench{cfg: cfg, out: out, db: db, store: store.NewStore(db), hook: hook}
	b.org = &identity.Organization{Name: "usersbench"}
	if err := b.store.Orgs.Create(ctx, b.org); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	server := api.New(api.Config{}, api.Deps{Store: b.store, Tokens: benchTokens{orgID: b.org.ID},
		Log: slog.New(slog.DiscardHandler)})
	b.srv = httptest.NewServer(server.Handler())
	b.client = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	return b, nil
}

func (b *bench) close() error {
	b.srv.Close()
	return b.db.Close()
}

func (b *bench) seed(ctx context.Context) error {
	t0 := time.Now()
	if err := seedUsers(ctx, b.db.DB, b.org.ID, b.cfg.users); err != nil {
		return err
	}
	b.out.Printf("seeded %d users with COPY (+ VACUUM ANALYZE) in %s\n\n", b.cfg.users, time.Since(t0).Round(time.Millisecond))
	return nil
}

// apiPage is an op that pages GET /users with query through next_cursor,
// starting over after the last page.
func (b *bench) apiPage(query url.Values) op {
	return func(ctx context.Context, cursor *string) error {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		if *cursor != "" {
			q.Set("cursor", *cursor)
		}
		req, err := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/api/v1/users?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", auth.Scheme+" "+token)
		resp, err := b.client.Do(req)
		if err != nil {
			return err
		}
		buf := bodyBuffers.Get().(*bytes.Buffer)
		defer bodyBuffers.Put(buf)
		buf.Reset()
		_, err = buf.ReadFrom(resp.Body)
		err = errors.Join(err, resp.Body.Close())
		if err != nil {
			return err
		}
		body := buf.Bytes()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d: %.200s", resp.StatusCode, body)
		}
		*cursor = nextCursor(body)
		return nil
	}
}

// bodyBuffers recycles the buffers the clients read pages into, as a load
// generator does: the client's allocations are not the API's cost, but
// they run on the same cores.
var bodyBuffers = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 128<<10)) }}

// nextCursor finds meta.next_cursor in a list body without decoding the
// whole page (the client's cost is not the API's).
func nextCursor(body []byte) string {
	const key = `"next_cursor":"`
	i := bytes.LastIndex(body, []byte(key))
	if i < 0 {
		return ""
	}
	rest := body[i+len(key):]
	return string(rest[:bytes.IndexByte(rest, '"')])
}

// directPage is an op that runs the statements the API ran for a page
// (captured from it) directly on the database: the count, then the keyset
// page after the last id seen, scanning every column.
func (b *bench) directPage(stmts []string) (op, error) {
	if len(stmts) != 2 {
		return nil, fmt.Errorf("expected a count and a page statement, captured %d", len(stmts))
	}
	countSQL, pageSQL := stmts[0], stmts[1]
	m := keysetID.FindStringIndex(pageSQL)
	if m == nil {
		return nil, fmt.Errorf("no keyset condition in %s", pageSQL)
	}
	before, after := pageSQL[:m[0]], pageSQL[m[1]:]
	first := before + "TRUE" + after
	return func(ctx context.Context, cursor *string) (err error) {
		if err = drain(b.db.DB.QueryContext(ctx, countSQL)); err != nil {
			return err
		}
		query := first
		if *cursor != "" {
			query = before + `("id" > ` + *cursor + ")" + after
		}
		rows, err := b.db.DB.QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer benchrun.Cleanup(&err, rows.Close)
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		raw := make([]sql.RawBytes, len(cols))
		for i := range raw {
			vals[i] = &raw[i]
		}
		var last string
		for i := 0; rows.Next(); i++ {
			if err = rows.Scan(vals...); err != nil {
				return err
			}
			if i < 100 {
				last = string(raw[0])
			}
		}
		*cursor = last
		return rows.Err()
	}, nil
}

// keysetID finds the keyset condition of a page in id order.
var keysetID = regexp.MustCompile(`\("id" > [0-9]+\)`)

func (b *bench) listThroughput(ctx context.Context) error {
	b.out.Printf("(a) GET /users?limit=100, paging through next_cursor, %d clients, %s each in %d alternating turns\n",
		b.cfg.concurrency, b.cfg.duration, b.cfg.turns)
	stmts, err := b.showStatements(ctx, url.Values{"limit": {"100"}})
	if err != nil {
		return err
	}
	direct, err := b.directPage(stmts)
	if err != nil {
		return err
	}
	var profErr error
	profiled := func(i, turn int, run func()) {
		stop, err := b.startProfile(fmt.Sprintf("%s.%d", []string{"", ".sql", ".store"}[i], turn))
		if err != nil {
			profErr = err
		} else {
			defer func() { profErr = errors.Join(profErr, stop()) }()
		}
		run()
	}
	all := interleave(ctx, b.cfg.turns, b.cfg.concurrency, b.cfg.duration, profiled,
		b.apiPage(url.Values{"limit": {"100"}}), direct, b.storePage(url.Values{"limit": {"100"}}))
	if profErr != nil {
		return profErr
	}
	apiStats, sqlStats, storeStats := all[0], all[1], all[2]
	b.out.Printf("    API        %s\n    direct SQL %s\n    store only %s\n    API / direct SQL throughput: %.0f%%\n\n",
		apiStats, sqlStats, storeStats, 100*apiStats.throughput()/sqlStats.throughput())
	return nil
}

func (b *bench) filteredList(ctx context.Context) error {
	filter := `department eq "Dept-07" and status eq 1`
	b.out.Printf("(b) GET /users?limit=100&filter=%s, paging, %d clients, %s each in %d alternating turns\n",
		filter, b.cfg.concurrency, b.cfg.duration, b.cfg.turns)
	query := url.Values{"limit": {"100"}, "filter": {filter}}
	stmts, err := b.showStatements(ctx, query)
	if err != nil {
		return err
	}
	direct, err := b.directPage(stmts)
	if err != nil {
		return err
	}
	all := interleave(ctx, b.cfg.turns, b.cfg.concurrency, b.cfg.duration, nil, b.apiPage(query), direct)
	apiStats, sqlStats := all[0], all[1]
	one := load(ctx, 1, b.cfg.duration/3, b.apiPage(query))
	b.out.Printf("    API        %s\n    direct SQL %s\n    API, 1 client %s\n\n", apiStats, sqlStats, one)
	return nil
}

// showStatements runs a second page of the list through the API, capturing
// its SQL, and prints each statement with its EXPLAIN ANALYZE.
func (b *bench) showStatements(ctx context.Context, query url.Values) ([]string, error) {
	cursor := ""
	page := b.apiPage(query)
	if err := page(ctx, &cursor); err != nil {
		return nil, err
	}
	b.hook.start()
	err := page(ctx, &cursor)
	stmts := b.hook.stop()
	if err != nil {
		return nil, err
	}
	for _, s := range stmts {
		b.out.Printf("    SQL: %s\n", shorten(s))
		if err = b.explain(ctx, s); err != nil {
			return nil, err
		}
	}
	return stmts, nil
}

// explain prints the EXPLAIN ANALYZE of statement s.
func (b *bench) explain(ctx context.Context, s string) (err error) {
	rows, err := b.db.DB.QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+s)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, rows.Close)
	for rows.Next() {
		var line string
		if err = rows.Scan(&line); err != nil {
			return err
		}
		b.out.Printf("      | %s\n", line)
	}
	return rows.Err()
}

// shorten writes a SELECT's column list as "…" to keep the report readable.
func shorten(s string) string {
	if i, j := strings.Index(s, "SELECT "), strings.Index(s, " FROM "); i == 0 && j > 60 {
		return "SELECT " + s[7:40] + "… (every column)" + s[j:]
	}
	return s
}

// captureHook records the statements bun runs while capturing.
type captureHook struct {
	mu    sync.Mutex
	on    bool
	stmts []string
}

func (h *captureHook) start() { h.mu.Lock(); h.on, h.stmts = true, nil; h.mu.Unlock() }

func (h *captureHook) stop() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on = false
	return h.stmts
}

// BeforeQuery implements bun.QueryHook.
func (h *captureHook) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

// AfterQuery implements bun.QueryHook.
func (h *captureHook) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.on {
		h.stmts = append(h.stmts, e.Query)
	}
}

// startProfile starts the CPU profile asked for, if any, into its file
// name with suffix, and returns what stops it and closes the file.
func (b *bench) startProfile(suffix string) (func() error, error) {
	if b.cfg.cpuProfile == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(b.cfg.cpuProfile + suffix) //nolint:gosec // the file the operator named with -cpuprofile
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error { pprof.StopCPUProfile(); return f.Close() }, nil
}

// drain reads every row of a result.
func drain(rows *sql.Rows, err error) error {
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	return errors.Join(rows.Err(), rows.Close())
}

// storePage is an op that pages through UserStore.List, as the API does
// but without HTTP and JSON: the same SQL, scanned into models.User.
func (b *bench) storePage(query url.Values) op {
	return func(ctx context.Context, cursor *string) error {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		if *cursor != "" {
			q.Set("cursor", *cursor)
		}
		p, err := listing.Parse(q, identity.UserListing)
		if err != nil {
			return err
		}
		_, meta, err := b.store.Users.List(ctx, b.org.ID, identity.LicensingBoth, p)
		if err != nil {
			return err
		}
		*cursor = ""
		if m, ok := meta.(*listing.CursorMeta); ok && m.NextCursor != nil {
			*cursor = *m.NextCursor
		}
		return nil
	}
}
