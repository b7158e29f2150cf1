package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// generator sends the requests: one keep-alive HTTP client holding a
// connection per client, the token of the seeded admin.
type generator struct {
	base, auth string
	http       *http.Client
}

func newGenerator(base, token string, clients int) *generator {
	tr := &http.Transport{MaxIdleConns: clients * 2, MaxIdleConnsPerHost: clients * 2, MaxConnsPerHost: clients,
		IdleConnTimeout: time.Minute, DisableCompression: true}
	return &generator{base: base + "/api/v1", auth: "Service-oauthtoken " + token,
		http: &http.Client{Transport: tr, Timeout: time.Minute}}
}

// do sends a request and wants the status want; out, if not nil, receives
// the answer's JSON. Any other status is an error naming the request and
// the answer.
func (g *generator) do(ctx context.Context, method, path string, body []byte, want int, out any) (err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", g.auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { err = errors.Join(err, resp.Body.Close()) }()
	if resp.StatusCode != want || out != nil {
		data, readErr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != want {
			return fmt.Errorf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, bytes.TrimSpace(data))
		}
		if readErr != nil {
			return fmt.Errorf("%s %s: %w", method, path, readErr)
		}
		return json.Unmarshal(data, out)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// idAnswer is the part of a created user's or group's answer read: its id.
type idAnswer struct {
	Data struct {
		ID string `json:"id"`
	} `json:"data"`
}

// createUser creates a user named by key and returns its id.
func (g *generator) createUser(ctx context.Context, key string) (string, error) {
	body, _ := json.Marshal(map[string]any{"firstName": "Crud", "lastName": key, "email": key + "@crud.bench",
		"department": "Dept-00", "title": "Engineer", "city": "Lyon"})
	var a idAnswer
	if err := g.do(ctx, http.MethodPost, "/users", body, http.StatusCreated, &a); err != nil {
		return "", err
	}
	if a.Data.ID == "" {
		return "", fmt.Errorf("POST /users answered no id")
	}
	return a.Data.ID, nil
}

// seeded is what every run starts from: the users each client owns and
// the groups.
type seeded struct {
	owned  [][]string // by client
	groups []string
}

// fixedMembers is how many users each seeded group holds from the start;
// they belong to no client, so no client adds or deletes them.
const fixedMembers = 10

// seed creates, through the API, the groups with fixedMembers users each
// and then the users the clients own, clients requests at a time: the
// same for both builds.
func (g *generator) seed(ctx context.Context, users, groups, clients int) (*seeded, error) {
	s := &seeded{owned: make([][]string, clients), groups: make([]string, groups)}
	fixed := min(groups*fixedMembers, users-clients)
	ids := make([]string, users)
	err := parallel(ctx, users, clients, func(ctx context.Context, i int) (err error) {
		ids[i], err = g.createUser(ctx, fmt.Sprintf("seed-%05d", i))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("seed users: %w", err)
	}
	err = parallel(ctx, groups, clients, func(ctx context.Context, j int) error {
		var members []string
		for i := j; i < fixed; i += groups {
			members = append(members, ids[i])
		}
		body, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("Crud group %02d", j), "description": "crudbench",
			"is_dynamic": false, "members": members})
		var a idAnswer
		doErr := g.do(ctx, http.MethodPost, "/groups", body, http.StatusCreated, &a)
		s.groups[j] = a.Data.ID
		return doErr
	})
	if err != nil {
		return nil, fmt.Errorf("seed groups: %w", err)
	}
	for i := fixed; i < users; i++ {
		c := (i - fixed) % clients
		s.owned[c] = append(s.owned[c], ids[i])
	}
	return s, nil
}

// client is one closed-loop client: its random steps, the users it owns
// (only it patches, deletes or adds them to groups, so every request must
// succeed) and the membership it added and removes next.
type client struct {
	g      *generator
	mix    mix
	id     int
	rng    *rand.Rand
	users  []string
	groups []string
	n      int // requests sent: names its users and changes
	member struct{ group, user string }
}

// sample is what a client measured: latencies by kind, requests that
// failed.
type sample struct {
	lat      [numReqs][]time.Duration
	errs     int
	firstErr error
}

func (s *sample) add(o *sample) {
	for k := range s.lat {
		s.lat[k] = append(s.lat[k], o.lat[k]...)
	}
	s.errs += o.errs
	if s.firstErr == nil {
		s.firstErr = o.firstErr
	}
}

// step runs one step of the mix and records its requests in smp.
func (c *client) step(ctx context.Context, smp *sample) {
	c.n++
	kind := c.mix.pick(c.rng.IntN(100))
	// A client left with no user of its own (the one in a group excepted)
	// creates one instead of changing one.
	if (kind == opPatch || kind == opDelete || kind == opMember && c.member.user == "") && len(c.users) <= 1 {
		kind = opCreate
	}
	timed := func(k reqKind, fn func() error) {
		t0 := time.Now()
		err := fn()
		if ctx.Err() != nil {
			return // the run was cut short: not the service's failure
		}
		if err != nil {
			if smp.errs == 0 {
				smp.firstErr = err
			}
			smp.errs++
			return
		}
		smp.lat[k] = append(smp.lat[k], time.Since(t0))
	}
	switch kind {
	case opCreate:
		timed(reqCreate, func() error {
			id, err := c.g.createUser(ctx, fmt.Sprintf("c%02d-%07d", c.id, c.n))
			if err == nil {
				c.users = append(c.users, id)
			}
			return err
		})
	case opPatch:
		user := c.users[c.rng.IntN(len(c.users))]
		body, _ := json.Marshal(map[string]any{"department": fmt.Sprintf("Dept-%02d", c.n%50),
			"title": "Engineer " + strconv.Itoa(c.n)})
		timed(reqPatch, func() error { return c.g.do(ctx, http.MethodPatch, "/users/"+user, body, http.StatusOK, nil) })
	case opList:
		timed(reqList, func() error { return c.g.do(ctx, http.MethodGet, "/users?limit=100", nil, http.StatusOK, nil) })
	case opMember:
		if m := c.member; m.user != "" {
			timed(reqRemoveMember, func() error {
				err := c.g.do(ctx, http.MethodDelete, "/groups/"+m.group+"/members?ids="+m.user, nil, http.StatusOK, nil)
				if err == nil {
					c.member.group, c.member.user = "", ""
				}
				return err
			})
			return
		}
		group, user := c.groups[c.rng.IntN(len(c.groups))], c.users[c.rng.IntN(len(c.users))]
		body, _ := json.Marshal(map[string]any{"members": []string{user}})
		timed(reqAddMember, func() error {
			err := c.g.do(ctx, http.MethodPost, "/groups/"+group+"/members", body, http.StatusOK, nil)
			if err == nil {
				c.member.group, c.member.user = group, user
			}
			return err
		})
	case opDelete:
		i := c.rng.IntN(len(c.users))
		if c.users[i] == c.member.user { // kept until it leaves its group
			i = (i + 1) % len(c.users)
		}
		user := c.users[i]
		timed(reqDelete, func() error {
			err := c.g.do(ctx, http.MethodDelete, "/users/"+user, nil, http.StatusNoContent, nil)
			if err == nil {
				c.users[i] = c.users[len(c.users)-1]
				c.users = c.users[:len(c.users)-1]
			}
			return err
		})
	}
}

// loop runs every client's steps for d and returns what they measured and
// how long the run took. Clients start no step after d and finish the one
// under way.
func loop(ctx context.Context, clients []*client, d time.Duration) (*sample, time.Duration) {
	all := &sample{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for _, c := range clients {
		wg.Go(func() {
			mine := &sample{}
			for ctx.Err() == nil && time.Now().Before(deadline) {
				c.step(ctx, mine)
			}
			mu.Lock()
			all.add(mine)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, time.Since(start)
}

// pollAudit reads the newest event of the audit log every interval for d,
// as a SIEM or an event hook's dispatcher polls it: each poll numbers the
// events committed since the one before (sqldb.NumberAuditEvents), so the
// run pays for the numbering. It returns how many polls were answered; a
// nil g, or a build whose answer is not 200 (one without the audit log),
// is not polled.
func (g *generator) pollAudit(ctx context.Context, every, d time.Duration) int {
	if g == nil {
		return 0
	}
	n := 0
	deadline := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if err := g.do(ctx, http.MethodGet, "/audit-events?limit=1&sort_order=DESCENDING", nil, http.StatusOK, nil); err != nil {
			return n
		}
		n++
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
	return n
}

// parallel runs fn(0) … fn(n-1) from workers goroutines and returns the
// first error; after it, no further fn starts.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
