package oauth_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
)

// TestContract: the authorization server's answers are the ones
// api/openapi.yaml documents.
func TestContract(t *testing.T) {
	f := newFixture(t, dbtest.SQLite(t), false, nil)
	client, secret := f.client(f.env.Org, models.ClientServer, callback)
	b := f.browser()
	check := func(method, path string, form url.Values) *http.Response {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, f.env.URL+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		apitest.CheckResponse(t, req, resp, data)
		return resp
	}

	authPath := "/oauth/v2/auth?" + authParams(client, "svc.job.READ").Encode()
	check("GET", "/.well-known/oauth-authorization-server", nil)
	check("GET", "/oauth/v2/auth?client_id=nope&response_type=code&scope=svc.job.READ&redirect_uri=x", nil)
	check("GET", "/oauth/v2/auth?"+authParams(client, "svc.job.READ", "redirect_uri", "https://evil.example.com/").Encode(), nil)
	check("GET", "/oauth/v2/auth?"+authParams(client, "svc.nothing.READ").Encode(), nil)
	form := formFields(t, b.get(f.env.URL+authPath))
	form.Set("email", f.admin.Email)
	form.Set("password", "wrong")
	check("POST", "/oauth/v2/login", form)
	form.Set("password", adminPassword)
	check("POST", "/oauth/v2/login", form)
	consent := formFields(t, b.get(f.env.URL+authPath))
	consent.Set("decision", "allow")
	resp := check("POST", "/oauth/v2/consent", consent)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	code := loc.Query().Get("code")

	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback},
		"client_id": {client.ID}, "client_secret": {"wrong"}}
	check("POST", "/oauth/v2/token", exchange)
	exchange.Set("client_secret", secret)
	check("POST", "/oauth/v2/token", exchange)
	check("POST", "/oauth/v2/token", exchange) // used twice
	check("POST", "/oauth/v2/token/revoke", url.Values{"token": {"x.y"}})
	check("POST", "/oauth/v2/token/revoke", url.Values{})
}
