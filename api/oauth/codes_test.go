package oauth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/oauth"
	"iam/models/dbtest"
	"iam/models/oauthstore"
)

const callback = "http://127.0.0.1:9/callback"

// TestCode_Redirect: the redirect after consent carries the code, the state,
// location and accounts-server (spec 5, step 1).
func TestCode_Redirect(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, func(c *oauth.Config) { c.Location = "eu" })
		client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
		q := f.code(authParams(client, "svc.job.READ", "state", "opaque-state-1"))
		if q.Get("state") != "opaque-state-1" || q.Get("location") != "eu" || q.Get("accounts-server") != f.env.URL {
			t.Errorf("redirect query = %v; want state, location=eu, accounts-server=%s", q, f.env.URL)
		}
		// state is optional, and may be short.
		if q := f.code(authParams(client, "svc.job.READ")); q.Has("state") {
			t.Errorf("redirect without state carries state: %v", q)
		}
		if q := f.code(authParams(client, "svc.job.READ", "state", "x")); q.Get("state") != "x" {
			t.Errorf("short state came back as %q", q.Get("state"))
		}
	})
}

// TestCode_UsedTwice: a code works once; its second use is refused with the
// RFC 6749 error body and revokes the tokens of the first exchange.
func TestCode_UsedTwice(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		code := f.code(authParams(client, "svc.job.READ", "access_type", "offline")).Get("code")

		first := f.exchange(client, secret, code, callback).tokens(t)
		if first.RefreshToken == "" {
			t.Fatal("no refresh token for access_type=offline")
		}
		if s := f.apiStatus("/api/v1/jobs", first.AccessToken); s != http.StatusOK {
			t.Fatalf("the first exchange's access token: %d", s)
		}

		again := f.exchange(client, secret, code, callback)
		if code, _ := again.oauthError(t); again.status != http.StatusBadRequest || code != "invalid_grant" {
			t.Errorf("second use: %d %s, want 400 invalid_grant", again.status, again.body)
		}
		if s := f.apiStatus("/api/v1/jobs", first.AccessToken); s != http.StatusUnauthorized {
			t.Errorf("after the code's reuse its access token answers %d, want 401", s)
		}
		refresh := f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"refresh_token"},
			"refresh_token": {first.RefreshToken}, "client_id": {client.ID}, "client_secret": {secret}})
		if code, _ := refresh.oauthError(t); code != "invalid_grant" {
			t.Errorf("after the code's reuse its refresh token gives %d %s, want invalid_grant", refresh.status, refresh.body)
		}
	})
}

// TestCode_Expired: a code lives one minute (its stored expiry says so);
// after its lifespan it is refused.
func TestCode_Expired(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		before := time.Now()
		f.code(authParams(client, "svc.job.READ"))
		var exp time.Time
		if err := db.NewSelect().Table("oauth_tokens").Column("expires_at").Where("kind = 'code'").Scan(t.Context(), &exp); err != nil {
			t.Fatal(err)
		}
		if life := exp.Sub(before); life < 59*time.Second || life > 62*time.Second {
			t.Errorf("a code lives %v, want one minute", life)
		}

		short := f.newServer(oauth.Config{Issuer: f.env.URL, Secret: testSecret, AuthorizeCodeLifespan: time.Second})
		code := f.codeFrom(short, authParams(client, "svc.job.READ"))
		time.Sleep(2100 * time.Millisecond)
		late := f.exchange(client, secret, code, callback)
		if code, desc := late.oauthError(t); late.status != http.StatusBadRequest || code != "invalid_grant" || !strings.Contains(desc, "expired") {
			t.Errorf("expired code: %d %s, want 400 invalid_grant (expired)", late.status, late.body)
		}
	})
}

// codeFrom runs the code flow against another server over the same store by
// swapping it in for the fixture's while the flow runs.
func (f *fixture) codeFrom(srv *oauth.Server, params url.Values) string {
	f.t.Helper()
	prev := f.holder.srv.Swap(srv)
	defer f.holder.srv.Store(prev)
	return f.code(params).Get("code")
}

// TestCode_RedirectURIMismatch: the token request must repeat the
// authorization request's redirect_uri.
func TestCode_RedirectURIMismatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		other := "http://127.0.0.1:9/other"
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback, other)
		code := f.code(authParams(client, "svc.job.READ")).Get("code")
		for _, redirect := range []string{other, "", callback + "/"} {
			r := f.exchange(client, secret, code, redirect)
			if errCode, _ := r.oauthError(t); r.status != http.StatusBadRequest || errCode != "invalid_grant" {
				t.Errorf("redirect_uri %q: %d %s, want 400 invalid_grant", redirect, r.status, r.body)
			}
		}
	})
}

// TestCode_ClientMismatch: a code works for its own client only, with its
// secret.
func TestCode_ClientMismatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		other, otherSecret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		code := f.code(authParams(client, "svc.job.READ")).Get("code")

		r := f.exchange(client, secret+"x", code, callback)
		if errCode, _ := r.oauthError(t); r.status != http.StatusUnauthorized || errCode != "invalid_client" {
			t.Errorf("wrong secret: %d %s, want 401 invalid_client", r.status, r.body)
		}
		r = f.exchange(other, otherSecret, code, callback)
		if errCode, _ := r.oauthError(t); r.status != http.StatusBadRequest || errCode != "invalid_grant" {
			t.Errorf("another client: %d %s, want 400 invalid_grant", r.status, r.body)
		}
		f.exchange(client, secret, code, callback).tokens(t)
	})
}

// TestAuthorize_RedirectURIMustEqualARegisteredOne: an unregistered
// redirect_uri is answered in the browser, never redirected to.
func TestAuthorize_RedirectURIMustEqualARegisteredOne(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
		b := f.browser()
		for _, redirect := range []string{"", "https://evil.example.com/cb", "http://127.0.0.1:10/callback", callback + "?x=1"} {
			p := authParams(client, "svc.job.READ")
			p.Set("redirect_uri", redirect)
			r := b.get(f.authURL(p))
			if r.status != http.StatusBadRequest || r.header.Get("Location") != "" || !strings.Contains(r.body, "redirect") {
				t.Errorf("redirect_uri %q: %d, Location %q; want 400 with the error page", redirect, r.status, r.header.Get("Location"))
			}
		}
		p := authParams(client, "svc.job.READ")
		p.Set("client_id", "unknown")
		if r := b.get(f.authURL(p)); r.status != http.StatusUnauthorized || r.header.Get("Location") != "" {
			t.Errorf("unknown client: %d, Location %q; want the error page", r.status, r.header.Get("Location"))
		}
	})
}

func pkcePair(verifier string) (challenge string) {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// TestPKCE: public clients (browser, mobile) must use PKCE with S256.
func TestPKCE(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		for _, typ := range []oauthstore.ClientType{oauthstore.ClientBrowser, oauthstore.ClientMobile, oauthstore.ClientNonBrowserMobile} {
			t.Run(string(typ), func(t *testing.T) {
				client, secret := f.client(f.env.Org, typ, callback)
				if secret != "" {
					t.Fatalf("a %s client got a secret", typ)
				}
				verifier := strings.Repeat("v", 43) + string(typ)
				// Without a challenge, or with plain, the request is refused
				// before the sign-in page.
				b := f.browser()
				for _, extra := range [][]string{nil, {"code_challenge", verifier, "code_challenge_method", "plain"}} {
					r := b.get(f.authURL(authParams(client, "svc.job.READ", extra...)))
					if q := r.location(t).Query(); q.Get("error") != "invalid_request" {
						t.Errorf("challenge %v: redirect %v, want error=invalid_request", extra, q)
					}
				}

				code := f.code(authParams(client, "svc.job.READ", "code_challenge", pkcePair(verifier), "code_challenge_method", "S256")).Get("code")
				public := func(extra ...string) *response {
					form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {client.ID}, "redirect_uri": {callback}}
					for i := 0; i+1 < len(extra); i += 2 {
						form.Set(extra[i], extra[i+1])
					}
					return f.tokenCall("/oauth/v2/token", nil, form)
				}
				r := public("code_verifier", strings.Repeat("w", 43))
				if errCode, _ := r.oauthError(t); errCode != "invalid_grant" {
					t.Errorf("wrong verifier: %d %s, want invalid_grant", r.status, r.body)
				}
				// A wrong verifier spends the challenge: a new code is needed.
				code = f.code(authParams(client, "svc.job.READ", "code_challenge", pkcePair(verifier), "code_challenge_method", "S256")).Get("code")
				tok := public("code_verifier", verifier).tokens(t)
				if s := f.apiStatus("/api/v1/jobs", tok.AccessToken); s != http.StatusOK {
					t.Errorf("the PKCE token answers %d", s)
				}
			})
		}
	})
}
