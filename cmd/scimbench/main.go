// Command scimbench measures /scim/v2 on PostgreSQL with 1,000,000 users:
//
//	go run ./cmd/scimbench [-users 1000000] [-duration 10s] [-concurrency 32] [-rate 500] [-members 10000] [-groups 10000] [-pages 0] [-cpuprofile FILE]
//
// It seeds the users with COPY (each with a userName and an externalId)
// into a throwaway PostgreSQL cluster (the installed server binaries, as
// the dbtest package finds them) or into the database IAM_BENCH_DATABASE_URL
// names (migrated first; the rows stay), serves the API in process with a
// provisioning token, and prints:
//
//   - GET /Users?filter=userName eq "…" and externalId eq "…" at the given
//     concurrency, each request a random user: throughput, p50, p99
//     (target: p99 ≤ 5 ms at 32 clients), in a closed loop (the most the
//     machine serves) and in an open loop at -rate lookups/s in all (the
//     latency of the same clients when the machine is not saturated), next
//     to GET /healthz at the same schedule (the machine's and HTTP's share);
//   - a PATCH adding -members members to a group in one request, and one
//     removing them (target: ≤ 2 s each);
//   - paging the whole directory with count=100 through /scim/v2/Users
//     (startIndex) next to GET /api/v1/users?limit=100 (next_cursor), one
//     client each, reading a page in turn (target: SCIM within 1.2× of
//     REST); -pages caps the
//     pages of each (0: all); -cpuprofile writes a CPU profile of the
//     paging run to FILE;
//   - -groups static groups of 10 members each (seeded with SQL): the
//     whole list paged with count=100 and excludedAttributes=members, as
//     Entra reads groups, next to the same pages with their members.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"

	"iam/api"
	"iam/api/auth"
	"iam/cmd/internal/benchrun"
	"iam/models"
	"iam/models/dbtest/pgcluster"
	"iam/models/identity"
	"iam/models/sqldb"
	"iam/models/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scimbench:", err)
		os.Exit(1)
	}
}

type config struct {
	users, concurrency, members, pages, groups int
	rate                                       float64
	duration                                   time.Duration
	cpuProfile                                 string
}

// restToken is the access token the benchmark's /api/v1 and /scim/v2
// accept without a database read, so that the paging runs compare the lists
// and not their credentials' checks.
const restToken = "scimbench"

type benchTokens struct{ orgID int64 }

// ValidateAccessToken accepts the benchmark's REST token.
func (t benchTokens) ValidateAccessToken(_ context.Context, tok string) (*auth.Principal, error) {
	if tok != restToken {
		return nil, errors.New("unknown token")
	}
	return &auth.Principal{UserID: 1, OrgID: t.orgID, Scopes: []string{"svc.user.READ", "svc.scim.READ"}}, nil
}

type bench struct {
	cfg     config
	out     *benchrun.Report
	store   *store.Store
	org     *identity.Organization
	srv     *httptest.Server
	client  *http.Client
	scimTok string
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) (err error) {
	out := benchrun.NewReport(stdout)
	defer benchrun.Cleanup(&err, out.Err)
	fs := flag.NewFlagSet("scimbench", flag.ContinueOnError)
	var cfg config
	fs.IntVar(&cfg.users, "users", 1_000_000, "users to seed")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "length of each load run")
	fs.IntVar(&cfg.concurrency, "concurrency", 32, "concurrent clients of the lookups")
	fs.Float64Var(&cfg.rate, "rate", 500, "lookups/s the clients send in all in the open-loop run (0: closed loop only)")
	fs.IntVar(&cfg.members, "members", 10_000, "members one PATCH adds and one removes")
	fs.IntVar(&cfg.groups, "groups", 10_000, "static groups of 10 members the group list pages through")
	fs.IntVar(&cfg.pages, "pages", 0, "pages of 100 each paging run reads (0: the whole directory)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the paging run to `FILE`")
	if err = fs.Parse(args); err != nil {
		return err
	}
	cfg.members = min(cfg.members, cfg.users)
	dsn, stopPG, err := benchrun.Postgres(ctx, getenv, pgcluster.Options{Config: "shared_buffers = 1GB\nmax_wal_size = 4GB\n", Prefix: "iam-scimbench-pg-"}, out)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, stopPG)
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, db.Close)
	if !sqldb.IsPostgres(db) {
		return errors.New("the benchmark needs PostgreSQL")
	}
	db.SetMaxOpenConns(cfg.concurrency + 8)
	db.SetMaxIdleConns(cfg.concurrency + 8)
	if _, err = sqldb.MigrateUp(ctx, db); err != nil {
		return err
	}
	b := &bench{cfg: cfg, out: out, store: store.NewStore(db), org: &identity.Organization{Name: "scimbench"},
		client: &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}}
	if err = b.store.Orgs.Create(ctx, b.org); err != nil {
		return err
	}
	if _, b.scimTok, err = b.store.ProvisioningTokens.Create(ctx, b.org.ID, "scimbench", nil); err != nil {
		return err
	}
	b.srv = httptest.NewServer(api.New(api.Config{}, api.Deps{Store: b.store, Tokens: benchTokens{orgID: b.org.ID},
		Log: slog.New(slog.DiscardHandler)}).Handler())
	defer b.srv.Close()

	t0 := time.Now()
	ids, err := seedUsers(ctx, db.DB, b.org.ID, cfg.users)
	if err != nil {
		return err
	}
	out.Printf("seeded %d users with COPY (+ VACUUM ANALYZE) in %s; load average %s\n\n", cfg.users, time.Since(t0).Round(time.Millisecond), benchrun.LoadAvg())

	for _, l := range []struct{ name, filter string }{
		{"userName eq", `userName eq "user%07d@example.com"`},
		{"externalId eq", `externalId eq "ext-%07d"`},
	} {
		lookup := func(ctx context.Context) error {
			f := fmt.Sprintf(l.filter, rand.IntN(cfg.users)) //nolint:gosec // G404: which user to look up, no secret
			body, gerr := b.get(ctx, "/scim/v2/Users?filter="+url.QueryEscape(f), "Bearer "+b.scimTok)
			if gerr == nil && !bytes.Contains(body, []byte(`"totalResults":1`)) {
				gerr = fmt.Errorf("%s: %.200s", f, body)
			}
			return gerr
		}
		out.Printf("GET /Users?filter=%-14s %d clients: %s (target p99 ≤ 5 ms)\n", l.name, cfg.concurrency, b.load(ctx, 0, lookup))
		if cfg.rate > 0 {
			out.Printf("GET /Users?filter=%-14s %d clients, open loop at %.0f/s: %s\n", l.name, cfg.concurrency, cfg.rate, b.load(ctx, cfg.rate, lookup))
		}
	}
	if cfg.rate > 0 {
		// The control: what the machine, HTTP and the clients alone give
		// at the same schedule.
		healthz := func(ctx context.Context) error {
			_, gerr := b.get(ctx, "/healthz", "")
			return gerr
		}
		out.Printf("control: GET /healthz        %d clients, open loop at %.0f/s: %s\n", cfg.concurrency, cfg.rate, b.load(ctx, cfg.rate, healthz))
	}
	if err = b.patchMembers(ctx, ids[:cfg.members]); err != nil {
		return err
	}
	if err = b.groupPages(ctx, db); err != nil {
		return err
	}
	return b.paging(ctx)
}

// seedUsers COPYs n users into org, each with a userName and an
// externalId, and returns their ids.
func seedUsers(ctx context.Context, db *sql.DB, orgID int64, n int) (ids []int64, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer benchrun.Cleanup(&err, conn.Close)
	cols := []string{"id", "org_id", "first_name", "last_name", "display_name", "email", "user_name", "external_id",
		"status", "is_licensed", "created_at", "updated_at"}
	now := time.Now().UTC()
	ids = make([]int64, 0, n)
	err = conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		i := 0
		_, copyErr := pc.CopyFrom(ctx, pgx.Identifier{"users"}, cols, pgx.CopyFromFunc(func() ([]any, error) {
			if i == n {
				return nil, nil
			}
			id := sqldb.NewID()
			ids = append(ids, id)
			email := fmt.Sprintf("user%07d@example.com", i)
			row := []any{id, orgID, fmt.Sprintf("First%d", i%5000), fmt.Sprintf("Last%d", i/5000), "User " + email,
				email, email, fmt.Sprintf("ext-%07d", i), identity.UserActive, true, now, now}
			i++
			return row, nil
		}))
		return copyErr
	})
	if err != nil {
		return nil, fmt.Errorf("copy users: %w", err)
	}
	if _, err = db.ExecContext(ctx, "VACUUM (ANALYZE) users"); err != nil {
		return nil, fmt.Errorf("vacuum users: %w", err)
	}
	return ids, nil
}

// do sends a request with an authorization header and returns the body of
// a 2xx answer.
func (b *bench) do(ctx context.Context, method, path, authz string, body []byte) ([]byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.srv.URL+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", authz)
	if body != nil {
		req.Header.Set("Content-Type", "application/scim+json")
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(resp.Body)
	err = errors.Join(err, resp.Body.Close())
	if err == nil && resp.StatusCode/100 != 2 {
		err = fmt.Errorf("%s %s: status %d: %.300s", method, path, resp.StatusCode, data)
	}
	return data, err
}

func (b *bench) get(ctx context.Context, path, authz string) ([]byte, error) {
	return b.do(ctx, "GET", path, authz, nil)
}

// stats are one load run's latencies.
type stats struct {
	lat      []time.Duration
	errs     int
	firstErr error
	elapsed  time.Duration
}

func (s stats) String() string {
	slices.Sort(s.lat)
	text := fmt.Sprintf("%8.1f req/s  p50 %6.2f ms  p99 %6.2f ms  (%d requests, %d errors)",
		float64(len(s.lat))/s.elapsed.Seconds(), msOf(benchrun.Percentile(s.lat, 50)), msOf(benchrun.Percentile(s.lat, 99)), len(s.lat), s.errs)
	if s.firstErr != nil {
		text += "; first error: " + s.firstErr.Error()
	}
	return text
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// load runs op from the configured clients for the configured time: in a
// closed loop (rate 0: each client sends its next request as soon as the
// previous one is answered), or in an open loop at rate requests/s in all
// (client j sends its k-th request at (k·clients + j)/rate s from the
// start, whatever the answers, and the latency counts from then, so that a
// service falling behind shows its queue).
func (b *bench) load(ctx context.Context, rate float64, op func(context.Context) error) stats {
	var mu sync.Mutex
	var all stats
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(b.cfg.duration)
	for j := range b.cfg.concurrency {
		wg.Go(func() {
			var mine []time.Duration
			var bad int
			var first error
			for k := 0; ctx.Err() == nil; k++ {
				t0 := time.Now()
				if rate > 0 {
					t0 = start.Add(time.Duration(float64(k*b.cfg.concurrency+j) / rate * float64(time.Second)))
					time.Sleep(time.Until(t0))
				}
				if !t0.Before(deadline) {
					break
				}
				if err := op(ctx); err != nil {
					if bad == 0 {
						first = err
					}
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			all.lat = append(all.lat, mine...)
			all.errs += bad
			if all.firstErr == nil {
				all.firstErr = first
			}
		})
	}
	wg.Wait()
	all.elapsed = time.Since(start)
	return all
}

// patchMembers times one PATCH adding ids to a new group and one removing
// them.
func (b *bench) patchMembers(ctx context.Context, ids []int64) error {
	created, err := b.do(ctx, "POST", "/scim/v2/Groups", "Bearer "+b.scimTok, []byte(`{"displayName":"scimbench"}`))
	if err != nil {
		return err
	}
	var g struct {
		ID string `json:"id"`
	}
	if err = json.Unmarshal(created, &g); err != nil {
		return err
	}
	values := make([]map[string]string, len(ids))
	for i, id := range ids {
		values[i] = map[string]string{"value": models.FormatID(id)}
	}
	for _, op := range []string{"add", "remove"} {
		body, err := json.Marshal(map[string]any{"schemas": []string{"urn:ietf:params:scim:api:messages:2.0:PatchOp"},
			"Operations": []any{map[string]any{"op": op, "path": "members", "value": values}}})
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err = b.do(ctx, "PATCH", "/scim/v2/Groups/"+g.ID+"?excludedAttributes=members", "Bearer "+b.scimTok, body); err != nil {
			return err
		}
		b.out.Printf("PATCH /Groups/{id} %-6s %d members: %s (target ≤ 2 s)\n", op, len(ids), time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// groupPages seeds the configured groups, 10 members each, and pages
// through them with count=100, without and with their members.
func (b *bench) groupPages(ctx context.Context, db *bun.DB) error {
	n := b.cfg.groups
	if n <= 0 {
		return nil
	}
	t0 := time.Now()
	now := time.Now().UTC()
	base := sqldb.NewID()
	if _, err := db.ExecContext(ctx, `INSERT INTO groups (id, org_id, name, members_count, when_created, updated_at)
		SELECT ? + i, ?, 'group ' || i, 0, ?, ? FROM generate_series(1, ?) AS i`, base, b.org.ID, now, now, n); err != nil {
		return fmt.Errorf("seed groups: %w", err)
	}
	// Member k of the users in id order joins group k/10.
	if _, err := db.ExecContext(ctx, `INSERT INTO group_members (group_id, user_id, org_id)
		SELECT ? + 1 + k / 10, id, ? FROM (
			SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM users WHERE org_id = ? ORDER BY id LIMIT ?) AS u`,
		base, b.org.ID, b.org.ID, 10*n); err != nil {
		return fmt.Errorf("seed group members: %w", err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE groups SET members_count = (SELECT count(*) FROM group_members AS gm WHERE gm.group_id = groups.id)
		WHERE org_id = ?`, b.org.ID); err != nil {
		return fmt.Errorf("count group members: %w", err)
	}
	if _, err := db.ExecContext(ctx, "VACUUM (ANALYZE) groups, group_members"); err != nil {
		return fmt.Errorf("vacuum groups: %w", err)
	}
	b.out.Printf("\nseeded %d groups of 10 members in %s\n", n, time.Since(t0).Round(time.Millisecond))
	for _, q := range []struct{ name, query string }{
		{"excludedAttributes=members", "&excludedAttributes=members"},
		{"with members", ""},
	} {
		t0 = time.Now()
		read, pages := 0, 0
		for start := 1; ; start += 100 {
			body, err := b.get(ctx, fmt.Sprintf("/scim/v2/Groups?startIndex=%d&count=100%s", start, q.query), "Bearer "+b.scimTok)
			if err != nil {
				return err
			}
			pages++
			var page struct {
				Resources []struct {
					DisplayName string `json:"displayName"`
				} `json:"Resources"`
			}
			if err = json.Unmarshal(body, &page); err != nil {
				return err
			}
			for _, g := range page.Resources {
				if strings.HasPrefix(g.DisplayName, "group ") {
					read++
				}
			}
			if len(page.Resources) < 100 {
				break
			}
		}
		elapsed := time.Since(t0)
		if read != n {
			return fmt.Errorf("paging the groups %s read %d of %d", q.name, read, n)
		}
		b.out.Printf("GET /Groups?count=100 %-27s all %d groups in %s: %.2f ms a page\n", q.name, n, elapsed.Round(time.Millisecond),
			msOf(elapsed)/float64(pages))
	}
	return nil
}

// paging reads the directory 100 users a page through SCIM (startIndex),
// with the in-memory access token and with the provisioning token, and
// through the REST list (next_cursor), one client each. The three read in
// turn, a page each (the order rotating), so that the machine's drift
// during the run weighs on each alike; each page's time is its request
// and the decoding of its answer. -cpuprofile writes the CPU profile of
// the whole run (pprof's -focus tells scim.(*Server).listUsers from
// api.(*Server).listUsers).
func (b *bench) paging(ctx context.Context) error {
	pages := b.cfg.pages
	if pages <= 0 {
		pages = (b.cfg.users + 99) / 100
	}
	scim, provisioning, rest := b.scimPager(restToken), b.scimPager(b.scimTok), b.restPager()
	err := b.profiled(func() error {
		pagers := []*pager{scim, provisioning, rest}
		for i := 0; i < pages; i++ {
			for j := range pagers {
				if err := pagers[(i+j)%len(pagers)].step(ctx); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.out.Printf("paging count=100: SCIM %d users in %s, REST %d users in %s: %.2f× (target ≤ 1.2×)\n",
		scim.users, scim.elapsed.Round(time.Millisecond), rest.users, rest.elapsed.Round(time.Millisecond), scim.elapsed.Seconds()/rest.elapsed.Seconds())
	b.out.Printf("  (both with the same in-memory access token; SCIM with the provisioning token, read from the database: %s, %.2f×)\n",
		provisioning.elapsed.Round(time.Millisecond), provisioning.elapsed.Seconds()/rest.elapsed.Seconds())
	b.out.Printf("  (a user is %d bytes of JSON through SCIM, %d through REST)\n", scim.bytes/max(scim.users, 1), rest.bytes/max(rest.users, 1))
	return nil
}

// pager reads a list a page at a time (next answers the page's users and
// bytes, and whether another follows), adding up the time of the reads.
type pager struct {
	next         func(ctx context.Context) (users, size int, more bool, err error)
	done         bool
	elapsed      time.Duration
	users, bytes int
}

// step reads the next page, unless the list has ended.
func (p *pager) step(ctx context.Context) error {
	if p.done {
		return nil
	}
	t0 := time.Now()
	users, size, more, err := p.next(ctx)
	p.elapsed += time.Since(t0)
	p.users, p.bytes, p.done = p.users+users, p.bytes+size, !more
	return err
}

// scimPager pages through /scim/v2/Users with token.
func (b *bench) scimPager(token string) *pager {
	start := 1
	return &pager{next: func(ctx context.Context) (int, int, bool, error) {
		body, err := b.get(ctx, fmt.Sprintf("/scim/v2/Users?startIndex=%d&count=100", start), "Bearer "+token)
		if err != nil {
			return 0, 0, false, err
		}
		var page struct {
			Resources []json.RawMessage `json:"Resources"`
		}
		if err = json.Unmarshal(body, &page); err != nil {
			return 0, 0, false, err
		}
		start += len(page.Resources)
		return len(page.Resources), len(body), len(page.Resources) == 100, nil
	}}
}

// restPager pages through GET /api/v1/users, following next_cursor.
func (b *bench) restPager() *pager {
	cursor := ""
	return &pager{next: func(ctx context.Context) (int, int, bool, error) {
		path := "/api/v1/users?limit=100"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		body, err := b.get(ctx, path, auth.Scheme+" "+restToken)
		if err != nil {
			return 0, 0, false, err
		}
		var page struct {
			Data []json.RawMessage `json:"data"`
			Meta struct {
				NextCursor string `json:"next_cursor"`
			} `json:"meta"`
		}
		if err = json.Unmarshal(body, &page); err != nil {
			return 0, 0, false, err
		}
		cursor = page.Meta.NextCursor
		return len(page.Data), len(body), cursor != "", nil
	}}
}

// profiled runs run, writing its CPU profile to the -cpuprofile file when
// one is named.
func (b *bench) profiled(run func() error) (err error) {
	if b.cfg.cpuProfile == "" {
		return run()
	}
	f, err := os.Create(b.cfg.cpuProfile) //nolint:gosec // G304: the file the operator named with -cpuprofile
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, f.Close)
	if err = pprof.StartCPUProfile(f); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	return run()
}
