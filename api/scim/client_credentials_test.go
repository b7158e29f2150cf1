package scim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/api/auth"
	"iam/api/oauth"
	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/modeltest"
	"iam/models/oauthstore"
)

// realOAuth is the authorization server made after the API (it needs the
// API's URL as its issuer), as the service wires it: /oauth/v2 and the
// token validator of both surfaces.
type realOAuth struct{ srv atomic.Pointer[oauth.Server] }

func (o *realOAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.srv.Load().Handler().ServeHTTP(w, r)
}

func (o *realOAuth) ValidateAccessToken(ctx context.Context, tok string) (*auth.Principal, error) {
	return o.srv.Load().ValidateAccessToken(ctx, tok)
}

func (o *realOAuth) ValidateClientAccessToken(ctx context.Context, tok string) (*auth.Principal, error) {
	return o.srv.Load().ValidateClientAccessToken(ctx, tok)
}

// serviceToken registers a service client of org holding scopes and gets
// its token from the token endpoint with the client credentials grant.
func serviceToken(t *testing.T, env *apitest.Env, org *identity.Organization, scopes ...string) (*oauthstore.OAuthClient, string) {
	t.Helper()
	client := &oauthstore.OAuthClient{OrgID: org.ID, Name: "Engine of " + org.Name, Type: oauthstore.ClientService, Scopes: scopes}
	secret, err := env.Store.OAuthClients.Create(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/oauth/v2/token", strings.NewReader("grant_type=client_credentials"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(client.ID), url.QueryEscape(secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	var tok oauth.TokenResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("client credentials grant: %d %s", resp.StatusCode, raw)
	}
	return client, tok.AccessToken
}

// TestSCIM_ServiceClientToken: a service client's own token (client
// credentials) provisions over /scim/v2 with its svc.scim scopes, each
// write's audit event naming the client as actor; /api/v1 refuses it
// (401); a READ-only client may not write (403); another organization's
// service client sees 404 for this organization's user.
func TestSCIM_ServiceClientToken(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		o := &realOAuth{}
		env := apitest.New(t, db, apitest.Options{Tokens: o, OAuth: o})
		srv, err := oauth.New(oauth.Config{Issuer: env.URL, Secret: []byte("scim test secret of at least thirty-two bytes")}, oauth.Deps{Store: env.Store})
		if err != nil {
			t.Fatal(err)
		}
		o.srv.Store(srv)

		client, token := serviceToken(t, env, env.Org, "svc.scim.ALL")
		c := &scimClient{t: t, env: env, token: token}
		id := c.do("POST", "/Users", obj{"userName": "sam@example.com"}).want(t, 201).id()
		if u := user(t, env, id); u.UserName != "sam@example.com" {
			t.Fatalf("created user %+v", u)
		}
		created := modeltest.OneEvent(t, db, env.Org.ID, audit.UserCreated)
		if created.Actor != (models.Actor{Type: models.ActorClient, ID: client.ID, DisplayName: client.Name}) {
			t.Errorf("user.created actor = %+v, want the service client", created.Actor)
		}
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "replace", "path": "title", "value": "Lead"})).want(t, 200)

		// /api/v1 acts for users: the client's token is refused there.
		if r := env.Do(apitest.Request{Method: "GET", Path: "/api/v1/users", Token: token}); r.Status != http.StatusUnauthorized {
			t.Errorf("a service client's token on /api/v1: %d %s", r.Status, r.Body)
		}

		// A READ-only client reads, and may not write.
		_, readToken := serviceToken(t, env, env.Org, "svc.scim.READ")
		reader := &scimClient{t: t, env: env, token: readToken}
		reader.do("GET", "/Users/"+id, nil).want(t, 200)
		reader.do("DELETE", "/Users/"+id, nil).wantError(t, 403, "")

		// Another organization's service client.
		_, otherToken := serviceToken(t, env, env.NewOrg("Other"), "svc.scim.ALL")
		other := &scimClient{t: t, env: env, token: otherToken}
		other.do("GET", "/Users/"+id, nil).wantError(t, 404, "")
		other.do("DELETE", "/Users/"+id, nil).wantError(t, 404, "")

		// Deleting the client ends its token at once.
		if err := env.Store.OAuthClients.Delete(context.Background(), env.Org.ID, client.ID); err != nil {
			t.Fatal(err)
		}
		c.do("GET", "/Users/"+id, nil).wantError(t, 401, "")
	})
}
