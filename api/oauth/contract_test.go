package oauth_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"iam/models/dbtest"
	"iam/models/oauthstore"
)

// TestContract: the authorization server answers each case with the status
// api/openapi.yaml documents for it, in the shape it documents.
func TestContract(t *testing.T) {
	f := newFixture(t, dbtest.SQLite(t), false, nil)
	client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)
	b := f.browser()
	check := func(want int, method, path string, form url.Values) *response {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, f.env.URL+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp := b.do(req) // checks the answer against the document
		if resp.status != want {
			t.Errorf("%s %s answered %d, want %d: %.300s", method, path, resp.status, want, resp.body)
		}
		return resp
	}

	authPath := "/oauth/v2/auth?" + authParams(client, "svc.job.READ").Encode()
	check(http.StatusOK, "GET", "/.well-known/oauth-authorization-server", nil)
	// No client to redirect to: an error page, not a redirect.
	check(http.StatusUnauthorized, "GET", "/oauth/v2/auth?client_id=nope&response_type=code&scope=svc.job.READ&redirect_uri=x", nil)
	check(http.StatusBadRequest, "GET", "/oauth/v2/auth?"+authParams(client, "svc.job.READ", "redirect_uri", "https://evil.example.com/").Encode(), nil)
	// A known client and redirect URI: the error goes back to the client.
	if r := check(http.StatusSeeOther, "GET", "/oauth/v2/auth?"+authParams(client, "svc.nothing.READ").Encode(), nil); r.location(t).Query().Get("error") != "invalid_scope" {
		t.Errorf("an unknown scope redirects to %s, want error=invalid_scope", r.header.Get("Location"))
	}
	form := formFields(t, check(http.StatusOK, "GET", authPath, nil))
	form.Set("email", f.admin.Email)
	form.Set("password", "wrong")
	check(http.StatusUnauthorized, "POST", "/oauth/v2/login", form)
	form.Set("password", adminPassword)
	check(http.StatusSeeOther, "POST", "/oauth/v2/login", form)
	consent := formFields(t, check(http.StatusOK, "GET", authPath, nil))
	consent.Set("decision", "allow")
	resp := check(http.StatusSeeOther, "POST", "/oauth/v2/consent", consent)
	code := resp.location(t).Query().Get("code")
	if code == "" {
		t.Fatalf("consent redirects to %s, without a code", resp.header.Get("Location"))
	}

	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback},
		"client_id": {client.ID}, "client_secret": {"wrong"}}
	check(http.StatusUnauthorized, "POST", "/oauth/v2/token", exchange)
	exchange.Set("client_secret", secret)
	check(http.StatusOK, "POST", "/oauth/v2/token", exchange)
	check(http.StatusBadRequest, "POST", "/oauth/v2/token", exchange) // used twice
	check(http.StatusOK, "POST", "/oauth/v2/token/revoke", url.Values{"token": {"x.y"}})
	check(http.StatusBadRequest, "POST", "/oauth/v2/token/revoke", url.Values{})
}
