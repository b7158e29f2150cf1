package oauth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/uptrace/bun"
	"golang.org/x/oauth2"

	"iam/models/dbtest"
	"iam/models/oauthstore"
)

// chromiumPath finds the headless browser of the browser test.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the browser test needs Chromium, which is not installed: install it with `apt-get install -y chromium` (Debian package chromium)")
	return ""
}

// newChromium starts a headless Chromium with a fresh profile and returns
// a tab's context.
func newChromium(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-features", "HttpsUpgrades,HttpsFirstBalancedModeAutoEnable"),
		chromedp.UserDataDir(t.TempDir()),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// TestBrowserFlow drives the whole authorization code flow: golang.org/x/oauth2
// is the client, a headless Chromium fills in the sign-in and consent forms;
// the access token then calls the API, is refreshed, and the refresh token
// is revoked.
func TestBrowserFlow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)

		// The client's redirect endpoint.
		got := make(chan url.Values, 1)
		cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case got <- r.URL.Query():
			default:
			}
			if _, err := fmt.Fprint(w, `<!doctype html><title>Done</title><p id="done">Signed in.</p>`); err != nil {
				t.Errorf("the redirect endpoint's page: %v", err)
			}
		}))
		defer cb.Close()
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, cb.URL+"/callback")

		conf := &oauth2.Config{
			ClientID:     client.ID,
			ClientSecret: secret,
			RedirectURL:  cb.URL + "/callback",
			// One comma-separated scope string, as the interface writes it.
			Scopes: []string{"svc.job.READ,svc.job.DELETE"},
			Endpoint: oauth2.Endpoint{
				AuthURL:   f.env.URL + "/oauth/v2/auth",
				TokenURL:  f.env.URL + "/oauth/v2/token",
				AuthStyle: oauth2.AuthStyleInHeader,
			},
		}
		verifier := oauth2.GenerateVerifier()
		authURL := conf.AuthCodeURL("state-of-the-test", oauth2.AccessTypeOffline, oauth2.S256ChallengeOption(verifier))

		ctx := newChromium(t)
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		err := chromedp.Do(ctx,
			chromedp.Navigate(authURL),
			chromedp.WaitVisible(chromedp.ID("email")),
			chromedp.SendKeys(chromedp.ID("email"), f.admin.Email),
			chromedp.SendKeys(chromedp.ID("password"), adminPassword),
			chromedp.Click(chromedp.ID("sign-in")),
			chromedp.WaitVisible(chromedp.ID("allow")),
		)
		if err != nil {
			t.Fatalf("sign-in page: %v", err)
		}
		scopes, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("ul.scopes")))
		if err != nil || !strings.Contains(scopes, "svc.job.READ") || !strings.Contains(scopes, "svc.job.DELETE") {
			t.Errorf("the consent page lists %q (%v), want both scopes", scopes, err)
		}
		if err = chromedp.Do(ctx, chromedp.Click(chromedp.ID("allow")), chromedp.WaitVisible(chromedp.ID("done"))); err != nil {
			t.Fatalf("consent page: %v", err)
		}
		var q url.Values
		select {
		case q = <-got:
		case <-ctx.Done():
			t.Fatal("the browser never reached the redirect URI")
		}
		if q.Get("state") != "state-of-the-test" || q.Get("accounts-server") != f.env.URL || q.Get("location") == "" {
			t.Errorf("redirect query = %v", q)
		}

		tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatalf("exchange: %v", err)
		}
		if tok.TokenType != "Bearer" || tok.RefreshToken == "" || tok.ExpiresIn != 3600 {
			t.Errorf("token = type %q, refresh %v, expires_in %d", tok.TokenType, tok.RefreshToken != "", tok.ExpiresIn)
		}
		if s := f.apiStatus("/api/v1/jobs", tok.AccessToken); s != http.StatusOK {
			t.Fatalf("GET /api/v1/jobs with the token: %d", s)
		}

		// Refresh: a new access token, the same refresh token.
		refreshed, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
		if err != nil {
			t.Fatalf("refresh: %v", err)
		}
		if refreshed.AccessToken == tok.AccessToken || refreshed.RefreshToken != tok.RefreshToken {
			t.Errorf("refresh gave access %v (new: %v), refresh token kept: %v", refreshed.AccessToken != "",
				refreshed.AccessToken != tok.AccessToken, refreshed.RefreshToken == tok.RefreshToken)
		}
		if s := f.apiStatus("/api/v1/jobs", refreshed.AccessToken); s != http.StatusOK {
			t.Fatalf("GET /api/v1/jobs with the refreshed token: %d", s)
		}

		// Revoke the refresh token: it and both access tokens stop working.
		resp, err := http.PostForm(f.env.URL+"/oauth/v2/token/revoke", url.Values{"token": {tok.RefreshToken}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close() // only read: a close error tells the test nothing
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("revoke: %d", resp.StatusCode)
		}
		for _, access := range []string{tok.AccessToken, refreshed.AccessToken} {
			if s := f.apiStatus("/api/v1/jobs", access); s != http.StatusUnauthorized {
				t.Errorf("access token after revocation: %d, want 401", s)
			}
		}
		_, err = conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
			t.Errorf("refresh after revocation: %v, want invalid_grant", err)
		}
	})
}
