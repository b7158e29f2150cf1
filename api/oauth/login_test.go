package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/oauth"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/oauthstore"
	"iam/models/protection"
	"iam/models/store"
)

// TestLogin_AccountBlocking: failed sign-ins follow the organization's
// account blocking settings (spec 2.12).
func TestLogin_AccountBlocking(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		settings := protection.DefaultAdminSettings()
		settings.AccountBlocking.FailedAttemptsThreshold = 2
		if err := store.NewStore(db).Settings.Put(context.Background(), f.env.Org.ID, &settings); err != nil {
			t.Fatal(err)
		}
		client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
		authURL := f.authURL(authParams(client, "svc.job.READ"))
		b := f.browser()

		r := b.signIn(authURL, f.admin.Email, "wrong password")
		want := loginAnswer(t, r)
		if r.status != http.StatusUnauthorized || !strings.Contains(want, "The email or password is wrong") {
			t.Errorf("wrong password: %d, want 401 with the message:\n%s", r.status, r.body)
		}
		if !strings.Contains(r.body, `value="admin@example.com"`) {
			t.Error("the sign-in page forgot the email")
		}
		// Every refusal answers alike: an unknown email, the failure that
		// blocks, the right password while blocked, an inactive account with
		// the right password.
		same := func(what string, r *response) {
			t.Helper()
			if got := loginAnswer(t, r); r.status != http.StatusUnauthorized || got != want {
				t.Errorf("%s: %d %q, want 401 %q as for a wrong password", what, r.status, got, want)
			}
		}
		same("unknown email", b.signIn(authURL, "nobody@example.com", adminPassword))
		same("the failure that blocks", b.signIn(authURL, f.admin.Email, "wrong again"))
		same("right password while blocked", b.signIn(authURL, f.admin.Email, adminPassword))
		same("wrong password while blocked", b.signIn(authURL, f.admin.Email, "wrong once more"))
		blocked, err := f.users.Get(context.Background(), f.env.Org.ID, f.admin.ID)
		if err != nil || blocked.BlockedUntil == nil {
			t.Fatalf("the admin should be blocked after two failures: %+v %v", blocked, err)
		}
		inactive := f.newUser(f.env.Org, "inactive@example.com", identity.RoleAdmin)
		if _, err := f.users.Update(context.Background(), f.env.Org.ID, inactive.ID, func(u *identity.User) error { u.Status = identity.UserInactive; return nil }, nil); err != nil {
			t.Fatal(err)
		}
		same("inactive account, right password", f.browser().signIn(authURL, inactive.Email, adminPassword))
		same("inactive account, wrong password", f.browser().signIn(authURL, inactive.Email, "wrong"))
		// Another organization's client does not know the user at all.
		orgB := f.env.NewOrg("B")
		clientB, _ := f.client(orgB, oauthstore.ClientServer, callback)
		r = f.browser().signIn(f.authURL(authParams(clientB, "svc.job.READ")), f.user.Email, adminPassword)
		if r.status != http.StatusUnauthorized {
			t.Errorf("sign-in to another organization: %d, want 401", r.status)
		}
	})
}

// TestLogin_CSRF: the forms are refused without the browser's CSRF value.
func TestLogin_CSRF(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
		authURL := f.authURL(authParams(client, "svc.job.READ"))
		b := f.browser()
		form := formFields(t, b.get(authURL))
		form.Set("email", f.admin.Email)
		form.Set("password", adminPassword)

		forged := url.Values{}
		for k, v := range form {
			forged[k] = v
		}
		forged.Set("csrf_token", "forged")
		if r := b.post("/oauth/v2/login", forged); r.status != http.StatusForbidden {
			t.Errorf("forged CSRF value: %d, want 403", r.status)
		}
		if r := f.browser().post("/oauth/v2/login", form); r.status != http.StatusForbidden {
			t.Errorf("a browser without the CSRF cookie: %d, want 403", r.status)
		}
		if r := b.post("/oauth/v2/login", form); r.status != http.StatusSeeOther {
			t.Fatalf("the real form: %d, want 303", r.status)
		}
		consent := formFields(t, b.get(authURL))
		consent.Set("decision", "allow")
		consent.Set("csrf_token", "forged")
		if r := b.post("/oauth/v2/consent", consent); r.status != http.StatusForbidden {
			t.Errorf("consent with a forged CSRF value: %d, want 403", r.status)
		}
	})
}

// TestConsent_Refusals: denying, and a user who may grant no scope, give
// error=access_denied with the state.
func TestConsent_Refusals(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
		authURL := f.authURL(authParams(client, "svc.job.READ", "state", "state-123"))

		b := f.browser()
		b.signIn(authURL, f.admin.Email, adminPassword)
		q := b.decide(authURL, "deny").location(t).Query()
		if q.Get("error") != "access_denied" || q.Get("state") != "state-123" || q.Has("code") {
			t.Errorf("deny: redirect query %v, want error=access_denied with the state", q)
		}

		b = f.browser()
		if r := b.signIn(authURL, f.user.Email, adminPassword); r.status != http.StatusSeeOther {
			t.Fatalf("the user's sign-in: %d", r.status)
		}
		r := b.get(authURL)
		loc := r.location(t)
		if q := loc.Query(); q.Get("error") != "access_denied" || q.Get("state") != "state-123" ||
			loc.Scheme+"://"+loc.Host+loc.Path != callback {
			t.Errorf("a user who may grant nothing: redirect %s, want %s?error=access_denied", loc, callback)
		}
	})
}

// TestAuthorize_Scopes: scopes come comma- or space-separated; unknown or
// missing scopes are refused with invalid_scope.
func TestAuthorize_Scopes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		code := f.code(authParams(client, "svc.job.READ,svc.user.all svc.job.READ")).Get("code")
		if tok := f.exchange(client, secret, code, callback).tokens(t); tok.Scope != "svc.job.READ svc.user.all" {
			t.Errorf("granted scope %q", tok.Scope)
		}
		b := f.browser()
		for _, scope := range []string{"", "svc.nothing.READ", "svc.job.READ,svc.job.EXECUTE", "openid"} {
			r := b.get(f.authURL(authParams(client, scope)))
			if q := r.location(t).Query(); q.Get("error") != "invalid_scope" {
				t.Errorf("scope %q: redirect %v, want error=invalid_scope", scope, q)
			}
		}
		r := b.get(f.authURL(authParams(client, "svc.job.READ", "access_type", "forever")))
		if q := r.location(t).Query(); q.Get("error") != "invalid_request" {
			t.Errorf("access_type=forever: redirect %v, want error=invalid_request", q)
		}
	})
}

// TestPages_Headers: the pages forbid framing, scripts and caching.
func TestPages_Headers(t *testing.T) {
	f := newFixture(t, dbtest.SQLite(t), false, nil)
	client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
	authURL := f.authURL(authParams(client, "svc.job.READ"))
	b := f.browser()
	for name, r := range map[string]*response{
		"sign-in": b.get(authURL),
		"consent": func() *response { b.signIn(authURL, f.admin.Email, adminPassword); return b.get(authURL) }(),
		"error":   b.get(f.env.URL + "/oauth/v2/auth?client_id=nope"),
	} {
		csp := r.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			r.header.Get("X-Frame-Options") != "DENY" || r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s page headers: %v", name, r.header)
		}
		if strings.Contains(r.body, "<script") {
			t.Errorf("%s page holds a script", name)
		}
	}
	for _, c := range b.client.Jar.Cookies(mustURL(t, f.env.URL+"/oauth/v2/auth")) {
		if c.Name != "iam_csrf" && c.Name != "iam_login" {
			t.Errorf("unexpected cookie %s", c.Name)
		}
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRateLimits: the sign-in form and the token endpoint answer 429 with
// Retry-After beyond their rate.
func TestRateLimits(t *testing.T) {
	f := newFixture(t, dbtest.SQLite(t), false, func(c *oauth.Config) {
		c.LoginRate = oauth.RateLimit{PerMinute: 1, Burst: 2}
		c.TokenRate = oauth.RateLimit{PerMinute: 1, Burst: 3}
	})
	client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
	authURL := f.authURL(authParams(client, "svc.job.READ"))
	b := f.browser()
	form := formFields(t, b.get(authURL))
	form.Set("email", f.admin.Email)
	form.Set("password", "wrong password")
	for i := 1; i <= 3; i++ {
		r := b.post("/oauth/v2/login", form)
		switch {
		case i < 3 && r.status != http.StatusUnauthorized:
			t.Errorf("sign-in %d: %d, want 401", i, r.status)
		case i == 3 && (r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == ""):
			t.Errorf("sign-in %d: %d, Retry-After %q; want 429 with Retry-After", i, r.status, r.header.Get("Retry-After"))
		}
	}
	for i := 1; i <= 4; i++ {
		path := "/oauth/v2/token"
		if i == 2 {
			path = "/oauth/v2/token/revoke"
		}
		r := f.tokenCall(path, nil, url.Values{"grant_type": {"authorization_code"}, "token": {"x"}})
		if i == 4 {
			if code, _ := r.oauthError(t); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "60" || code == "" {
				t.Errorf("token call %d: %d %s, Retry-After %q; want 429 with Retry-After 60", i, r.status, r.body, r.header.Get("Retry-After"))
			}
		} else if r.status == http.StatusTooManyRequests {
			t.Errorf("token call %d limited already", i)
		}
	}
}

// TestMetadata: the RFC 8414 document names the endpoints and what they
// support.
func TestMetadata(t *testing.T) {
	f := newFixture(t, dbtest.SQLite(t), false, nil)
	r := f.browser().get("/.well-known/oauth-authorization-server")
	var md oauth.Metadata
	if err := json.Unmarshal([]byte(r.body), &md); err != nil || r.status != http.StatusOK {
		t.Fatalf("metadata: %d %s", r.status, r.body)
	}
	if md.Issuer != f.env.URL || md.AuthorizationEndpoint != f.env.URL+"/oauth/v2/auth" ||
		md.TokenEndpoint != f.env.URL+"/oauth/v2/token" || md.RevocationEndpoint != f.env.URL+"/oauth/v2/token/revoke" {
		t.Errorf("endpoints: %+v", md)
	}
	if strings.Join(md.CodeChallengeMethodsSupported, ",") != "S256" || strings.Join(md.ResponseTypesSupported, ",") != "code" {
		t.Errorf("PKCE methods %v, response types %v", md.CodeChallengeMethodsSupported, md.ResponseTypesSupported)
	}
	if strings.Join(md.GrantTypesSupported, ",") != "authorization_code,refresh_token,client_credentials" {
		t.Errorf("grant types %v", md.GrantTypesSupported)
	}
	if len(md.ScopesSupported) != 90 || md.ScopesSupported[0] != "svc.audit.READ" {
		t.Errorf("scopes: %d, first %v", len(md.ScopesSupported), md.ScopesSupported[:1])
	}
	if r := f.browser().unknown("/oauth/v2/nothing"); r.status != http.StatusNotFound {
		t.Errorf("unknown OAuth path: %d", r.status)
	}
}

// loginAnswer is the message of a sign-in page.
func loginAnswer(t *testing.T, r *response) string {
	t.Helper()
	m := loginError.FindStringSubmatch(r.body)
	if m == nil {
		t.Fatalf("no message on the sign-in page (%d):\n%s", r.status, r.body)
	}
	return m[1]
}

var loginError = regexp.MustCompile(`<p class="error" role="alert">([^<]*)</p>`)
