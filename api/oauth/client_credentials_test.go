package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/modeltest"
	"iam/models/oauthstore"
)

// serviceClient registers a service client of org holding scopes; it
// returns the client and its secret.
func (f *fixture) serviceClient(org *identity.Organization, scopes ...string) (*oauthstore.OAuthClient, string) {
	f.t.Helper()
	c := &oauthstore.OAuthClient{OrgID: org.ID, Name: "Provisioning engine", Type: oauthstore.ClientService, Scopes: scopes}
	secret, err := f.clients.Create(context.Background(), c)
	if err != nil {
		f.t.Fatalf("create service client: %v", err)
	}
	return c, secret
}

// basicTokenCall posts form to the token endpoint with the client's id and
// secret as HTTP Basic (client_secret_basic).
func (f *fixture) basicTokenCall(id, secret string, form url.Values) *response {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.env.URL+"/oauth/v2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	return (&browser{t: f.t, client: http.DefaultClient}).do(req)
}

// TestClientCredentials: a service client gets an access token of its own
// with client_secret_basic and with client_secret_post, holding all its
// registered scopes or those asked for, without a refresh token; the token
// is its client's (no user): /scim/v2's validator takes it, /api/v1's
// refuses it; its issue is audited with the client as actor.
func TestClientCredentials(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		ctx := context.Background()
		svc, secret := f.serviceClient(f.env.Org, "svc.scim.ALL")

		// client_secret_basic, no scope: every registered scope.
		r := f.basicTokenCall(svc.ID, secret, url.Values{"grant_type": {"client_credentials"}})
		tok := r.tokens(t)
		if tok.TokenType != "Bearer" || tok.ExpiresIn != 3600 || tok.Scope != "svc.scim.ALL" || tok.AccessToken == "" {
			t.Errorf("basic: token response = %+v", tok)
		}
		if tok.RefreshToken != "" || strings.Contains(r.body, "refresh_token") {
			t.Errorf("a client credentials answer carries a refresh token: %s", r.body)
		}
		p, err := f.srv.ValidateClientAccessToken(ctx, tok.AccessToken)
		if err != nil || p.UserID != 0 || p.OrgID != f.env.Org.ID || p.ClientID != svc.ID || p.Name != svc.Name || !slices.Equal(p.Scopes, []string{"svc.scim.ALL"}) {
			t.Fatalf("the client's principal = %+v, %v", p, err)
		}
		if p, err := f.srv.ValidateAccessToken(ctx, tok.AccessToken); err == nil {
			t.Errorf("/api/v1's validator accepted a token without a user: %+v", p)
		}
		if s := f.apiStatus("/api/v1/jobs", tok.AccessToken); s != http.StatusUnauthorized {
			t.Errorf("/api/v1 with a service client's token: %d, want 401", s)
		}

		// Issued as the client: the event names it, and no user.
		issued := modeltest.EventsOfType(t, db, f.env.Org.ID, audit.OAuthTokenIssued)
		if len(issued) != 1 {
			t.Fatalf("oauth.token.issued events: %+v", issued)
		}
		ev := issued[0]
		if ev.Actor.Type != models.ActorClient || ev.Actor.ID != svc.ID || ev.Actor.DisplayName != svc.Name {
			t.Errorf("oauth.token.issued actor = %+v", ev.Actor)
		}
		for _, target := range ev.Targets {
			if target.Type == identity.UserTargetType {
				t.Errorf("oauth.token.issued names a user: %+v", ev.Targets)
			}
		}
		if len(ev.Targets) != 2 || ev.Targets[0].Type != oauthstore.ClientTargetType || ev.Targets[0].ID != svc.ID {
			t.Errorf("oauth.token.issued targets = %+v", ev.Targets)
		}

		// client_secret_post, a scope the registration allows (ALL allows READ).
		tok = f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"client_credentials"}, "scope": {"svc.scim.READ"},
			"client_id": {svc.ID}, "client_secret": {secret}}).tokens(t)
		if tok.Scope != "svc.scim.READ" || tok.RefreshToken != "" {
			t.Errorf("post: token response = %+v", tok)
		}
		if p, err := f.srv.ValidateClientAccessToken(ctx, tok.AccessToken); err != nil || !slices.Equal(p.Scopes, []string{"svc.scim.READ"}) {
			t.Errorf("post: principal %+v, %v", p, err)
		}
	})
}

// TestClientCredentials_Refusals: a wrong secret is invalid_client; a
// client of another type is unauthorized_client; a scope outside the
// registration, or no scope of a resource it holds, is invalid_scope; a
// service client may use no other grant.
func TestClientCredentials_Refusals(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		svc, secret := f.serviceClient(f.env.Org, "svc.scim.READ")
		wantError := func(what string, r *response, status int, code string) {
			t.Helper()
			if got, desc := r.oauthError(t); r.status != status || got != code {
				t.Errorf("%s: %d %s (%s), want %d %s", what, r.status, got, desc, status, code)
			}
		}
		grant := url.Values{"grant_type": {"client_credentials"}}

		wantError("wrong secret, basic", f.basicTokenCall(svc.ID, secret+"x", grant), http.StatusUnauthorized, "invalid_client")
		wantError("wrong secret, post", f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"client_credentials"},
			"client_id": {svc.ID}, "client_secret": {"not the secret"}}), http.StatusUnauthorized, "invalid_client")

		for _, typ := range []oauthstore.ClientType{oauthstore.ClientServer, oauthstore.ClientSelf} {
			var uris []string
			if typ == oauthstore.ClientServer {
				uris = []string{callback}
			}
			other, otherSecret := f.client(f.env.Org, typ, uris...)
			wantError(string(typ)+" client", f.basicTokenCall(other.ID, otherSecret, grant), http.StatusBadRequest, "unauthorized_client")
			wantError(string(typ)+" client with a scope", f.basicTokenCall(other.ID, otherSecret, url.Values{"grant_type": {"client_credentials"},
				"scope": {"svc.scim.READ"}}), http.StatusBadRequest, "unauthorized_client")
		}
		browser, _ := f.client(f.env.Org, oauthstore.ClientBrowser, callback)
		wantError("public client", f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"client_credentials"},
			"client_id": {browser.ID}}), http.StatusBadRequest, "unauthorized_client")

		for _, scope := range []string{"svc.user.READ", "svc.scim.ALL", "svc.scim.WRITE", "offline_access", "svc.scim.READ svc.user.ALL"} {
			wantError("scope "+scope, f.basicTokenCall(svc.ID, secret, url.Values{"grant_type": {"client_credentials"}, "scope": {scope}}),
				http.StatusBadRequest, "invalid_scope")
		}
		wantError("refresh_token grant", f.basicTokenCall(svc.ID, secret, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"x"}}),
			http.StatusBadRequest, "unauthorized_client")
		if events := modeltest.EventsOfType(t, db, f.env.Org.ID, audit.OAuthTokenIssued); len(events) != 0 {
			t.Errorf("refused grants issued tokens: %+v", events)
		}
	})
}

// TestClientCredentials_TokenEnds: a service client's token fails
// validation at once when its client is deleted, and when it is revoked.
func TestClientCredentials_TokenEnds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		ctx := context.Background()
		svc, secret := f.serviceClient(f.env.Org, "svc.scim.ALL")
		grant := url.Values{"grant_type": {"client_credentials"}}

		revoked := f.basicTokenCall(svc.ID, secret, grant).tokens(t).AccessToken
		kept := f.basicTokenCall(svc.ID, secret, grant).tokens(t).AccessToken
		if r := f.tokenCall("/oauth/v2/token/revoke", nil, url.Values{"token": {revoked}}); r.status != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.status, r.body)
		}
		if _, err := f.srv.ValidateClientAccessToken(ctx, revoked); err == nil {
			t.Error("a revoked token still validates")
		}
		if _, err := f.srv.ValidateClientAccessToken(ctx, kept); err != nil {
			t.Fatalf("the other token: %v", err)
		}
		if revokedEvents := modeltest.EventsOfType(t, db, f.env.Org.ID, audit.OAuthTokenRevoked); len(revokedEvents) != 1 || revokedEvents[0].Actor.ID != svc.ID {
			t.Errorf("oauth.token.revoked events: %+v", revokedEvents)
		}

		if err := f.clients.Delete(ctx, f.env.Org.ID, svc.ID); err != nil {
			t.Fatal(err)
		}
		if p, err := f.srv.ValidateClientAccessToken(ctx, kept); err == nil {
			t.Errorf("the deleted client's token still validates: %+v", p)
		}
		if r := f.basicTokenCall(svc.ID, secret, grant); r.status != http.StatusUnauthorized {
			t.Errorf("the deleted client got a token: %d %s", r.status, r.body)
		}
	})
}
