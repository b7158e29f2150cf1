// Command decidebench measures conditional access decisions with 1,000
// policies and 10,000 condition entries in one organization:
//
//   - in process: decide.Decide over the organization's compiled snapshot
//     (loaded from the store as the API loads it), requests spread so that
//     the deciding policy is anywhere from the first to the default one
//     (every policy considered); it prints p50, p99 and the worst latency
//     and the decisions per second of one core, and the same percentiles
//     with the answer written (Decision.AppendJSON: the reasons of every
//     policy considered);
//   - over HTTP: POST /protection/conditional-access-policies/evaluate
//     against GET /users?limit=1 on the same server, taking turns, at
//     -concurrency clients; it prints both throughputs and their ratio.
//
// The database is a throwaway PostgreSQL cluster, or IAM_BENCH_DATABASE_URL
// (an empty database, migrated here).
//
// Usage: go run ./cmd/decidebench [-decisions 20000] [-duration 10s] [-turns 4] [-concurrency 16]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"iam/api"
	"iam/api/auth"
	"iam/cmd/internal/benchrun"
	"iam/models/dbtest/pgcluster"
	"iam/models/decide"
	"iam/models/identity"
	"iam/models/protection"
	"iam/models/sqldb"
	"iam/models/store"
)

const (
	policies       = 1000 // besides the default policy
	entriesPerSrc  = 10   // entries of each IP source config: 1,000 × 10 = 10,000
	token          = "decidebench"
	businessConfig = 10
	teamCount      = 20
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "decidebench:", err)
		os.Exit(1)
	}
}

type config struct {
	decisions   int
	duration    time.Duration
	turns       int
	concurrency int
	cpuProfile  string
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) (err error) {
	out := benchrun.NewReport(stdout)
	defer benchrun.Cleanup(&err, out.Err) // a report cut short fails the run
	fs := flag.NewFlagSet("decidebench", flag.ContinueOnError)
	var cfg config
	fs.IntVar(&cfg.decisions, "decisions", 20000, "in-process decisions to time")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "HTTP load in all, shared by the turns of both routes")
	fs.IntVar(&cfg.turns, "turns", 4, "turns each route takes, in alternation")
	fs.IntVar(&cfg.concurrency, "concurrency", 16, "concurrent HTTP clients")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the HTTP evaluate turns to this file")
	if err = fs.Parse(args); err != nil {
		return err
	}
	dsn, stopPG, err := benchrun.Postgres(ctx, getenv, pgcluster.Options{Prefix: "iam-decidebench-pg-"}, out)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, stopPG)
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, db.Close)
	db.SetMaxOpenConns(cfg.concurrency + 8)
	db.SetMaxIdleConns(cfg.concurrency + 8)
	if _, err = sqldb.MigrateUp(ctx, db); err != nil {
		return err
	}
	store := store.NewStore(db)
	start := time.Now()
	s, err := seed(ctx, store)
	if err != nil {
		return err
	}
	out.Printf("seeded %d policies (+ default), %d IP source configs of %d entries (%d entries), %d business hours configs in %v\n",
		policies, policies, entriesPerSrc, policies*entriesPerSrc, businessConfig, time.Since(start).Round(time.Millisecond))
	if err = inProcess(ctx, store, s, cfg, out); err != nil {
		return err
	}
	return overHTTP(ctx, store, s, cfg, out)
}

// seeded is what the requests name.
type seeded struct {
	org   *identity.Organization
	users []int64 // each in one team
	worst int64   // in every team
}

// srcAddr is address k of IP source i: 10.a.b.(16k+1), a.b = i.
func srcAddr(i, k int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), byte(16*k + 1)}) //nolint:gosec // i < policies < 1<<16 and k < entriesPerSrc: the bytes of the address, truncated on purpose
}

func seed(ctx context.Context, store *store.Store) (*seeded, error) {
	org := &identity.Organization{Name: "decidebench"}
	if err := store.Orgs.Create(ctx, org); err != nil {
		return nil, err
	}
	s := &seeded{org: org}
	// Each policy targets one of the teams; each user is in one team, so
	// policies/teams policies reach a user. The worst-case user is in every
	// team: every policy reaches them.
	var teams []*identity.Group
	for k := 0; k < teamCount; k++ {
		g := &identity.Group{OrgID: org.ID, Name: fmt.Sprintf("Team %d", k)}
		if err := store.Groups.Create(ctx, g, nil, nil); err != nil {
			return nil, err
		}
		teams = append(teams, g)
	}
	for i := 0; i < 100; i++ {
		u := &identity.User{OrgID: org.ID, Email: fmt.Sprintf("user%d@example.com", i), Status: identity.UserActive}
		if err := store.Users.Create(ctx, u, ""); err != nil {
			return nil, err
		}
		s.users = append(s.users, u.ID)
		if _, err := store.Groups.AddMembers(ctx, org.ID, teams[i%teamCount].ID, []int64{u.ID}); err != nil {
			return nil, err
		}
	}
	worst := &identity.User{OrgID: org.ID, Email: "everywhere@example.com", Status: identity.UserActive}
	if err := store.Users.Create(ctx, worst, ""); err != nil {
		return nil, err
	}
	s.worst = worst.ID
	for _, g := range teams {
		if _, err := store.Groups.AddMembers(ctx, org.ID, g.ID, []int64{worst.ID}); err != nil {
			return nil, err
		}
	}
	var hours []int64
	for i := 0; i < businessConfig; i++ {
		c := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyBusinessHours, DisplayName: fmt.Sprintf("Hours %d", i),
			Timezone: []string{"UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo"}[i%4], BusinessHoursBitmap: strings.Repeat("1", protection.BusinessHoursBits)}
		if err := store.ConditionConfigs.Create(ctx, c); err != nil {
			return nil, err
		}
		hours = append(hours, c.ID)
	}
	for i := 0; i < policies; i++ {
		var items []string
		for k := 0; k < entriesPerSrc-2; k++ {
			items = append(items, netip.PrefixFrom(srcAddr(i, k), 28).Masked().String())
		}
		v6 := func(k int) string { return fmt.Sprintf("2001:db8:%x::%x", i, k) }
		c := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: fmt.Sprintf("Source %d", i),
			IPAddresses: strings.Join(items, ","), IPAddressRanges: []protection.IPRange{{From: v6(0x10), To: v6(0x1f)}, {From: v6(0x100), To: v6(0x1ff)}}}
		if err := store.ConditionConfigs.Create(ctx, c); err != nil {
			return nil, fmt.Errorf("IP source %d: %w", i, err)
		}
		p := &protection.Policy{OrgID: org.ID, Name: fmt.Sprintf("Policy %d", i), IsEnabled: true, AccessType: []string{protection.AccessAllow, protection.AccessDeny}[i%2],
			GroupIDs:          []int64{teams[i%teamCount].ID},
			EndpointsSettings: []protection.EndpointSetting{{Endpoint: protection.EndpointNPS}},
			Conditions: []protection.PolicyCondition{
				{SequenceNumber: 1, FactorType: protection.FactorTypeIPAddress, Comparator: protection.ComparatorIn, FactorConfigs: []protection.RefID{protection.RefID(c.ID)}},
				{SequenceNumber: 2, FactorType: protection.FactorTypeTime, Comparator: protection.ComparatorIn, FactorConfigs: []protection.RefID{protection.RefID(hours[i%len(hours)])}},
			},
			CriteriaExpression: "1 and 2"}
		if err := store.Policies.Create(ctx, p, protection.PolicyActor{}); err != nil {
			return nil, fmt.Errorf("policy %d: %w", i, err)
		}
	}
	return s, nil
}

// request is request n: the address of a random policy's source (that policy
// decides), or one in no source (every policy considered, the default decides).
func request(r *rand.Rand, s *seeded) (netip.Addr, int64) {
	user := s.users[r.IntN(len(s.users))]
	if r.IntN(10) == 0 {
		return netip.AddrFrom4([4]byte{172, 16, byte(r.IntN(256)), byte(r.IntN(256))}), user //nolint:gosec // IntN(256) fits a byte
	}
	return srcAddr(r.IntN(policies), r.IntN(entriesPerSrc-2)).Next(), user
}

func inProcess(ctx context.Context, store *store.Store, s *seeded, cfg config, out *benchrun.Report) error {
	start := time.Now()
	set, err := store.Policies.LoadEnabledPolicies(ctx, s.org.ID)
	if err != nil {
		return err
	}
	loaded := time.Since(start)
	start = time.Now()
	snap := decide.Compile(s.org.ID, 1, set)
	compiled := time.Since(start)
	out.Printf("\nin process: %d policies loaded in %v, compiled in %v\n", snap.Policies(), loaded.Round(time.Microsecond), compiled.Round(time.Microsecond))
	for _, c := range []struct {
		name  string
		users []int64
	}{{fmt.Sprintf("a user in one team (%d of the policies reach them)", policies/teamCount), s.users}, {"the worst case: a user every policy reaches", []int64{s.worst}}} {
		if err := timeDecisions(ctx, store, s, snap, c.users, cfg, c.name, out); err != nil {
			return err
		}
	}
	return nil
}

func timeDecisions(ctx context.Context, store *store.Store, s *seeded, snap *decide.Snapshot, users []int64, cfg config, name string, out *benchrun.Report) error {
	groups := map[int64][]int64{}
	for _, u := range users {
		facts, err := store.DeviceGroups.DecisionFacts(ctx, s.org.ID, u, 0)
		if err != nil || !facts.UserExists {
			return fmt.Errorf("user groups: %w", err)
		}
		groups[u] = facts.UserGroups
	}
	r := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // a reproducible load, no secret
	lat := make([]time.Duration, cfg.decisions)
	written := make([]time.Duration, cfg.decisions) // the decision and its answer
	var buf []byte
	considered, notAssigned, size := 0, 0, 0
	now := time.Now()
	for i := range lat {
		ip, _ := request(r, s)
		user := users[r.IntN(len(users))]
		req := decide.Request{UserID: user, UserGroups: groups[user], Endpoint: protection.EndpointNPS, IP: ip, Time: now}
		t0 := time.Now()
		d := decide.Decide(snap, req, nil)
		lat[i] = time.Since(t0)
		var err error
		if buf, err = d.AppendJSON(buf[:0]); err != nil {
			return err
		}
		written[i] = time.Since(t0)
		size += len(buf)
		considered += d.Considered
		notAssigned += d.NotAssigned
		if d.Policy == nil {
			return errors.New("no policy decided")
		}
	}
	slices.Sort(lat)
	slices.Sort(written)
	var total time.Duration
	for _, l := range lat {
		total += l
	}
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	out.Printf("  %s: %d decisions, %.0f policies considered and %.0f passed over (not assigned) on average: p50 %v, p99 %v (target <= 1ms), max %v, %.0f decisions/s on one core\n",
		name, len(lat), float64(considered)/float64(len(lat)), float64(notAssigned)/float64(len(lat)),
		p(0.5).Round(time.Microsecond), p(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond), float64(len(lat))/total.Seconds())
	q := func(q float64) time.Duration { return written[int(q*float64(len(written)-1))] }
	out.Printf("    with the answer written (%.0f bytes on average, reasons of every policy considered): p50 %v, p99 %v, max %v\n",
		float64(size)/float64(len(written)), q(0.5).Round(time.Microsecond), q(0.99).Round(time.Microsecond), written[len(written)-1].Round(time.Microsecond))
	return nil
}

type benchTokens struct{ orgID int64 }

func (t benchTokens) ValidateAccessToken(_ context.Context, tok string) (*auth.Principal, error) {
	if tok != token {
		return nil, errors.New("unknown token")
	}
	return &auth.Principal{UserID: 1, OrgID: t.orgID, Scopes: []string{"svc.user.READ", "svc.conditional_access_policy.READ"}}, nil
}

type result struct {
	n   int64
	dur time.Duration
	lat []time.Duration
}

func overHTTP(ctx context.Context, store *store.Store, s *seeded, cfg config, out *benchrun.Report) (err error) {
	server := api.New(api.Config{}, api.Deps{Store: store, Tokens: benchTokens{orgID: s.org.ID}, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(server.Handler())
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	evaluate := func(r *rand.Rand) *http.Request {
		ip, user := request(r, s)
		body := fmt.Sprintf(`{"user_id":"%d","endpoint":"NPS","ip":"%s"}`, user, ip)
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/protection/conditional-access-policies/evaluate", bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	users := func(*rand.Rand) *http.Request {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/users?limit=1", nil)
		return req
	}
	// Warm up both (the first decision compiles the snapshot).
	for _, mk := range []func(*rand.Rand) *http.Request{evaluate, users} {
		if _, err = load(ctx, client, mk, 2, 300*time.Millisecond); err != nil {
			return err
		}
	}
	var ev, us result
	turn := cfg.duration / time.Duration(2*cfg.turns)
	if cfg.cpuProfile != "" {
		var f *os.File
		if f, err = os.Create(cfg.cpuProfile); err != nil {
			return err
		}
		defer benchrun.Cleanup(&err, f.Close) // after StopCPUProfile wrote the profile
		if err = pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for i := 0; i < cfg.turns; i++ {
		for _, x := range []struct {
			mk  func(*rand.Rand) *http.Request
			acc *result
		}{{evaluate, &ev}, {users, &us}} {
			r, loadErr := load(ctx, client, x.mk, cfg.concurrency, turn)
			if loadErr != nil {
				return loadErr
			}
			x.acc.n += r.n
			x.acc.dur += r.dur
			x.acc.lat = append(x.acc.lat, r.lat...)
		}
	}
	rate := func(r result) float64 { return float64(r.n) / r.dur.Seconds() }
	p99 := func(r result) time.Duration {
		slices.Sort(r.lat)
		return r.lat[int(0.99*float64(len(r.lat)-1))].Round(10 * time.Microsecond)
	}
	out.Printf("\nover HTTP, %d clients, %d turns of %v each:\n", cfg.concurrency, cfg.turns, turn)
	out.Printf("  POST /protection/conditional-access-policies/evaluate: %.0f req/s, p99 %v\n", rate(ev), p99(ev))
	out.Printf("  GET /users?limit=1:                                    %.0f req/s, p99 %v\n", rate(us), p99(us))
	out.Printf("  evaluate at %.0f%% of GET /users?limit=1 (target >= 50%%)\n", 100*rate(ev)/rate(us))
	return nil
}

// load runs conc clients sending mk's requests for d.
func load(ctx context.Context, client *http.Client, mk func(*rand.Rand) *http.Request, conc int, d time.Duration) (result, error) {
	var n atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < conc; c++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, seed+1)) //nolint:gosec // a reproducible load, no secret
			var mine []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				req := mk(r)
				req.Header.Set("Authorization", auth.Scheme+" "+token)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					err = errors.Join(err, resp.Body.Close())
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("%s %s: status %d", req.Method, req.URL.Path, resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
				n.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(uint64(c + 1))
	}
	wg.Wait()
	return result{n: n.Load(), dur: time.Since(start), lat: lat}, firstErr
}
