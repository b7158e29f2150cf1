package oauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"iam/api/apitest"
	"iam/api/auth"
	"iam/models/dbtest"
	"iam/models/oauthstore"
	"iam/models/sqldb"
)

// The outage tests stop the PostgreSQL server under a steady mixed load and
// start it again: what the clients see while it is down, and how soon every
// request succeeds again.

// outageRecoveryLimit is how soon after the database is back every request
// must succeed again.
const outageRecoveryLimit = 5 * time.Second

// outageCall is one finished request of the load.
type outageCall struct {
	who        string // worker
	op         string // what the request does
	start, end time.Time
	status     int
	ok         bool // the answer of success for op
	retryAfter string
	oauthError string // the error field of an OAuth error body
	body       string // for messages
}

// outageLoad is the load's record of calls.
type outageLoad struct {
	mu    sync.Mutex
	calls []outageCall
}

func (l *outageLoad) add(c outageCall) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

// outageTimes are the moments of one outage.
type outageTimes struct {
	stopping, stopped, starting, up time.Time
}

// TestOutage_PostgresStopped_503NotAuthFailure runs a steady mixed load —
// API clients creating, updating, listing, grouping and deleting users with
// real OAuth tokens, a client refreshing its token at the token endpoint, and
// browsers signing in — over a PostgreSQL cluster of its own, stopped and
// started again twice (an operator's restart, which ends every session with
// 57P01, then a crash, where the connections just drop). While the database
// is down every answer is 503 with Retry-After: no 401, no 500, no
// invalid_client or invalid_grant, no "wrong password", and the sign-ins
// tried are not counted as failed; an authorization code exchanged meanwhile
// is not spent. Within outageRecoveryLimit of the database
// being back every request succeeds again, with the same tokens.
func TestOutage_PostgresStopped_503NotAuthFailure(t *testing.T) {
	cl := dbtest.NewCluster(t)
	ctx := context.Background()
	db, err := sqldb.Open(ctx, cl.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	f := newFixture(t, db, false, nil)
	client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)

	const apiWorkers = 6
	tokens := make([]string, apiWorkers)
	for i := range tokens {
		tokens[i] = f.issue(f.srv, client, f.admin, false, "svc.user.ALL", "svc.group.ALL").AccessToken
	}
	refresh := f.issue(f.srv, client, f.admin, true, "svc.user.READ").RefreshToken
	if refresh == "" {
		t.Fatal("no refresh token issued")
	}
	var group struct {
		Data struct{ ID string } `json:"data"`
	}
	r := f.env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups", Token: tokens[0], Body: map[string]any{"name": "Outage"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create group: %d %s", r.Status, r.Body)
	}
	r.JSON(t, &group)

	// The browsers' sign-in form, fetched while the database is up, is
	// posted again and again: during an outage it cannot be fetched.
	authURL := f.authURL(authParams(client, "svc.user.READ"))
	adminB, userB := f.browser(), f.browser()
	adminForm, userForm := formFields(t, adminB.get(authURL)), formFields(t, userB.get(authURL))
	adminForm.Set("email", f.admin.Email)
	adminForm.Set("password", adminPassword)
	userForm.Set("email", f.user.Email)
	userForm.Set("password", "not the password")

	for _, mode := range []struct {
		name      string
		immediate bool
	}{{"restart", false}, {"crash", true}} {
		load := &outageLoad{}
		var times outageTimes
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i, tok := range tokens {
			wg.Go(func() { outageAPIWorker(runCtx, t, f, load, fmt.Sprintf("api-%d", i), tok, group.Data.ID) })
		}
		wg.Go(func() { outageTokenWorker(runCtx, t, f, load, client.ID, secret, refresh) })
		wg.Go(func() { outageLoginWorker(runCtx, t, f, load, "sign-in", adminB, adminForm, http.StatusSeeOther, nil) })
		wg.Go(func() { outagePageWorker(runCtx, t, f, load, adminB, authURL) })
		// The wrong password is tried only while the database is down, so
		// that any failure counted would show afterwards.
		down := &outageGate{}
		wg.Go(func() {
			outageLoginWorker(runCtx, t, f, load, "wrong-password", userB, userForm, http.StatusUnauthorized, down)
		})

		code := f.code(authParams(client, "svc.user.READ")).Get("code")
		time.Sleep(time.Second) // the load runs
		times.stopping = time.Now()
		cl.Stop(mode.immediate)
		times.stopped = time.Now()
		down.set(true)
		// A code exchanged while the database is down is not spent: 503,
		// then it works once the database is back.
		if r := f.exchange(client, secret, code, callback); r.status != http.StatusServiceUnavailable ||
			r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `"temporarily_unavailable"`) {
			t.Errorf("%s: a code exchanged while the database is down: %d %s, want 503 temporarily_unavailable with Retry-After", mode.name, r.status, r.body)
		}
		time.Sleep(2500 * time.Millisecond) // the database is down
		down.set(false)
		times.starting = time.Now()
		cl.Start()
		times.up = time.Now()
		time.Sleep(outageRecoveryLimit + 1500*time.Millisecond)
		if r := f.exchange(client, secret, code, callback); r.status != http.StatusOK {
			t.Errorf("%s: the code tried during the outage, once the database is back: %d %s, want 200", mode.name, r.status, r.body)
		}
		stop()
		wg.Wait()
		outageCheck(t, mode.name, load, times)
	}

	// No sign-in tried during the outages was counted as failed; one now is.
	if u, err := f.users.Get(ctx, f.env.Org.ID, f.user.ID); err != nil || u.FailedLogins != 0 {
		t.Errorf("after wrong passwords sent during the outages, the user has %v failed sign-ins (%v), want 0", u.FailedLogins, err)
	}
	if r := userB.post("/oauth/v2/login", userForm); r.status != http.StatusUnauthorized {
		t.Errorf("a wrong password after the outages: %d, want 401", r.status)
	}
	if u, err := f.users.Get(ctx, f.env.Org.ID, f.user.ID); err != nil || u.FailedLogins != 1 {
		t.Errorf("after one wrong password, the user has %v failed sign-ins (%v), want 1", u.FailedLogins, err)
	}

	// The same tokens work.
	for i, tok := range tokens {
		if s := f.apiStatus("/api/v1/users?limit=1", tok); s != http.StatusOK {
			t.Errorf("token %d after the outages: GET /users answered %d, want 200", i, s)
		}
	}
	r2 := f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh},
		"client_id": {client.ID}, "client_secret": {secret}})
	if r2.status != http.StatusOK {
		t.Errorf("the refresh token after the outages: %d %s", r2.status, r2.body)
	}
}

// outageAPIWorker is one API client: create a user, update it, add it to the
// group, list users, delete it, over and over (at most 2,000 requests).
func outageAPIWorker(ctx context.Context, t *testing.T, f *fixture, load *outageLoad, who, token, groupID string) {
	hc := &http.Client{Timeout: 20 * time.Second}
	call := func(op, method, path string, body any, want int) (outageCall, []byte) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, f.env.URL+path, rd)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", auth.Scheme+" "+token)
		c := outageCall{who: who, op: op, start: time.Now()}
		resp, err := hc.Do(req)
		if err != nil {
			c.end, c.body = time.Now(), err.Error()
			load.add(c)
			return c, nil
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close() // only read: a close error tells the test nothing
		c.end = time.Now()
		apitest.CheckResponse(t, req, resp, data)
		c.status, c.ok, c.retryAfter, c.body = resp.StatusCode, resp.StatusCode == want, resp.Header.Get("Retry-After"), string(data)
		load.add(c)
		return c, data
	}
	for n := 0; n < 400 && ctx.Err() == nil; n++ {
		c, data := call("create user", "POST", "/api/v1/users", map[string]any{
			"firstName": "Load", "lastName": who, "email": fmt.Sprintf("%s-%d-%d@example.com", who, n, time.Now().UnixNano()),
		}, http.StatusCreated)
		if !c.ok {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var created struct {
			Data struct{ ID string } `json:"data"`
		}
		_ = json.Unmarshal(data, &created)
		id := created.Data.ID
		call("update user", "PATCH", "/api/v1/users/"+id, map[string]any{"title": fmt.Sprint("Round ", n)}, http.StatusOK)
		call("add to group", "POST", "/api/v1/groups/"+groupID+"/members", map[string]any{"members": []string{id}}, http.StatusOK)
		call("list users", "GET", "/api/v1/users?limit=20", nil, http.StatusOK)
		call("delete user", "DELETE", "/api/v1/users/"+id, nil, http.StatusNoContent)
		time.Sleep(20 * time.Millisecond)
	}
}

// outageTokenWorker refreshes an access token at the token endpoint, and
// revokes a token unknown to the server (200 by RFC 7009), over and over (at
// most 1,000 times).
func outageTokenWorker(ctx context.Context, t *testing.T, f *fixture, load *outageLoad, clientID, secret, refresh string) {
	hc := &http.Client{Timeout: 20 * time.Second}
	for n := 0; n < 1000 && ctx.Err() == nil; n++ {
		op, path := "refresh_token grant", "/oauth/v2/token"
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {clientID}, "client_secret": {secret}}
		if n%2 == 1 {
			op, path = "revoke", "/oauth/v2/token/revoke"
			form = url.Values{"token": {"unknown.token"}, "client_id": {clientID}, "client_secret": {secret}}
		}
		req, _ := http.NewRequest("POST", f.env.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		c := outageCall{who: "token", op: op, start: time.Now()}
		resp, err := hc.Do(req)
		if err != nil {
			c.end, c.body = time.Now(), err.Error()
			load.add(c)
			continue
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close() // only read: a close error tells the test nothing
		c.end = time.Now()
		apitest.CheckResponse(t, req, resp, data)
		c.status, c.ok, c.retryAfter, c.body = resp.StatusCode, resp.StatusCode == http.StatusOK, resp.Header.Get("Retry-After"), string(data)
		var e struct{ Error string }
		if json.Unmarshal(data, &e) == nil {
			c.oauthError = e.Error
		}
		load.add(c)
		time.Sleep(50 * time.Millisecond)
	}
}

// outagePageWorker opens the authorization page (the consent page of a
// signed-in browser), over and over (at most 1,000 times).
func outagePageWorker(ctx context.Context, t *testing.T, f *fixture, load *outageLoad, b *browser, authURL string) {
	for n := 0; n < 1000 && ctx.Err() == nil; n++ {
		req, _ := http.NewRequest("GET", authURL, nil)
		c := outageCall{who: "browser", op: "authorization page", start: time.Now()}
		resp, err := b.client.Do(req)
		if err != nil {
			c.end, c.body = time.Now(), err.Error()
			load.add(c)
			continue
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close() // only read: a close error tells the test nothing
		c.end = time.Now()
		apitest.CheckResponse(t, req, resp, data)
		c.status, c.ok, c.retryAfter, c.body = resp.StatusCode, resp.StatusCode == http.StatusOK, resp.Header.Get("Retry-After"), string(data)
		load.add(c)
		time.Sleep(100 * time.Millisecond)
	}
}

// outageGate lets a worker send requests only while it is open; closing it
// waits for the request under way.
type outageGate struct {
	mu   sync.RWMutex
	open bool
}

func (g *outageGate) set(open bool) {
	g.mu.Lock()
	g.open = open
	g.mu.Unlock()
}

// enter returns false when the gate is closed; otherwise the caller calls
// leave once its request is done.
func (g *outageGate) enter() bool {
	g.mu.RLock()
	if !g.open {
		g.mu.RUnlock()
		return false
	}
	return true
}

func (g *outageGate) leave() { g.mu.RUnlock() }

// outageLoginWorker posts a sign-in form, over and over (at most 1,000
// times), expecting want when the database is up; with a gate, only while
// the gate is open.
func outageLoginWorker(ctx context.Context, t *testing.T, f *fixture, load *outageLoad, who string, b *browser, form url.Values, want int, gate *outageGate) {
	hc := b.client // its cookies hold the form's CSRF value
	for n := 0; n < 1000 && ctx.Err() == nil; n++ {
		if gate != nil {
			if !gate.enter() {
				time.Sleep(20 * time.Millisecond)
				continue
			}
		}
		outageSignIn(t, f, load, hc, who, form, want)
		if gate != nil {
			gate.leave()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func outageSignIn(t *testing.T, f *fixture, load *outageLoad, hc *http.Client, who string, form url.Values, want int) {
	{
		req, _ := http.NewRequest("POST", f.env.URL+"/oauth/v2/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		c := outageCall{who: who, op: "sign in", start: time.Now()}
		resp, err := hc.Do(req)
		if err != nil {
			c.end, c.body = time.Now(), err.Error()
			load.add(c)
			return
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close() // only read: a close error tells the test nothing
		c.end = time.Now()
		apitest.CheckResponse(t, req, resp, data)
		c.status, c.ok, c.retryAfter, c.body = resp.StatusCode, resp.StatusCode == want, resp.Header.Get("Retry-After"), string(data)
		load.add(c)
	}
}

// outageCheck asserts what the load saw around one outage.
func outageCheck(t *testing.T, mode string, load *outageLoad, at outageTimes) {
	t.Helper()
	var total, during, unavailable, after int
	var lastFailure time.Time
	var slowest outageCall
	failures := map[string]int{}
	for _, c := range load.calls {
		total++
		if c.end.Sub(c.start) > slowest.end.Sub(slowest.start) {
			slowest = c
		}
		what := fmt.Sprintf("%s: %s %s at %+.2fs of the stop", mode, c.who, c.op, c.start.Sub(at.stopping).Seconds())
		if c.status == 0 {
			t.Errorf("%s: the request failed: %s", what, c.body)
			continue
		}
		if !c.ok {
			if c.end.After(lastFailure) {
				lastFailure = c.end
			}
			failures[c.op]++
		}
		switch {
		case c.ok:
		case c.status == http.StatusServiceUnavailable:
			unavailable++
			if c.retryAfter != fmt.Sprint(auth.RetryAfterSeconds) {
				t.Errorf("%s: 503 with Retry-After %q, want %d", what, c.retryAfter, auth.RetryAfterSeconds)
			}
			if (c.op == "refresh_token grant" || c.op == "revoke") && c.oauthError != "temporarily_unavailable" {
				t.Errorf("%s: 503 with error %q, want temporarily_unavailable: %s", what, c.oauthError, c.body)
			}
			if (c.op == "sign in" || c.op == "authorization page") && !strings.Contains(c.body, "temporarily unavailable") {
				t.Errorf("%s: the 503 page does not say the service is temporarily unavailable:\n%.600s", what, c.body)
			}
		default:
			t.Errorf("%s: answered %d, want success or 503: %.300s", what, c.status, c.body)
		}
		// Every request made entirely while the server was down got 503.
		if c.start.After(at.stopped) && c.end.Before(at.starting) {
			during++
			if c.status != http.StatusServiceUnavailable {
				t.Errorf("%s, while the database was down: answered %d, want 503: %.300s", what, c.status, c.body)
			}
		}
		// Every request made after the recovery limit succeeded.
		if c.start.After(at.up.Add(outageRecoveryLimit)) {
			after++
			if !c.ok {
				t.Errorf("%s, %v after the database came back: answered %d: %.300s", what, c.start.Sub(at.up).Round(time.Millisecond), c.status, c.body)
			}
		}
	}
	recovered := time.Duration(0)
	if lastFailure.After(at.up) {
		recovered = lastFailure.Sub(at.up)
	}
	t.Logf("%s: %d requests, %d while the database was down (stop took %v, start %v), %d answered 503 %v, %d after the recovery limit; the last failure ended %v after the database was back; the slowest request, %s %s at %+.2fs of the stop, took %v",
		mode, total, during, at.stopped.Sub(at.stopping).Round(time.Millisecond), at.up.Sub(at.starting).Round(time.Millisecond),
		unavailable, failures, after, recovered.Round(time.Millisecond),
		slowest.who, slowest.op, slowest.start.Sub(at.stopping).Seconds(), slowest.end.Sub(slowest.start).Round(time.Millisecond))
	if during < 20 || after < 20 {
		t.Errorf("%s: too few requests to judge: %d while down, %d after the recovery limit", mode, during, after)
	}
	if recovered > outageRecoveryLimit {
		t.Errorf("%s: requests failed until %v after the database was back, want at most %v", mode, recovered, outageRecoveryLimit)
	}
}

// TestOutage_SignInStatementTimeout_503FormNotWrongPassword: when the
// client's request can be read but the user cannot (the users table locked
// past the statement timeout), the sign-in form comes back 503 with
// Retry-After saying the service is temporarily unavailable, for the right
// password and a wrong one alike, and no failure is counted.
func TestOutage_SignInStatementTimeout_503FormNotWrongPassword(t *testing.T) {
	ctx := context.Background()
	db, err := sqldb.Open(ctx, dbtest.PostgresURL(t)+"&statement_timeout=300")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cerr := db.Close(); cerr != nil {
			t.Error(cerr)
		}
	})
	f := newFixture(t, db, false, nil)
	client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
	authURL := f.authURL(authParams(client, "svc.user.READ"))
	b := f.browser()
	form := formFields(t, b.get(authURL))

	lock, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := lock.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := lock.ExecContext(ctx, "BEGIN; LOCK TABLE users IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	for _, try := range []struct{ email, password string }{{f.user.Email, "wrong"}, {f.user.Email, adminPassword}} {
		form.Set("email", try.email)
		form.Set("password", try.password)
		r := b.post("/oauth/v2/login", form)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != fmt.Sprint(auth.RetryAfterSeconds) ||
			!strings.Contains(r.body, "temporarily unavailable") || !strings.Contains(r.body, `action="/oauth/v2/login"`) ||
			strings.Contains(r.body, "wrong") {
			t.Errorf("sign-in with %q while the users table is locked: %d Retry-After %q, want 503 with the form saying the service is temporarily unavailable:\n%.2000s",
				try.password, r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if u, err := f.users.Get(ctx, f.env.Org.ID, f.user.ID); err != nil || u.FailedLogins != 0 {
		t.Errorf("the user has %v failed sign-ins (%v), want 0", u.FailedLogins, err)
	}
	form.Set("password", adminPassword)
	if r := b.post("/oauth/v2/login", form); r.status != http.StatusSeeOther {
		t.Errorf("sign-in once the lock is gone: %d, want 303", r.status)
	}
}
