package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/auth"
	"iam/models/dbtest"
	"iam/models/oauthstore"
)

// TestToken_QueryParameters: the token endpoint reads its parameters from
// the query string, as the interface shows them (spec 5, steps 2 and 3).
func TestToken_QueryParameters(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		code := f.code(authParams(client, "svc.job.READ,svc.user.READ", "access_type", "offline")).Get("code")
		tok := f.tokenCall("/oauth/v2/token", url.Values{"code": {code}, "grant_type": {"authorization_code"},
			"client_id": {client.ID}, "client_secret": {secret}, "redirect_uri": {callback}}, nil).tokens(t)
		if tok.TokenType != "Bearer" || tok.ExpiresIn != 3600 || tok.RefreshToken == "" || tok.Scope != "svc.job.READ svc.user.READ" {
			t.Errorf("token response = %+v; want Bearer, 3600, a refresh token and both scopes", tok)
		}
		refreshed := f.tokenCall("/oauth/v2/token", url.Values{"refresh_token": {tok.RefreshToken}, "grant_type": {"refresh_token"},
			"client_id": {client.ID}, "client_secret": {secret}}, nil).tokens(t)
		if refreshed.AccessToken == "" || refreshed.AccessToken == tok.AccessToken {
			t.Errorf("refresh gave access token %q", refreshed.AccessToken)
		}
	})
}

// TestToken_Refresh: a refresh token is issued only with access_type=offline,
// lives until revoked (it does not rotate), and each use gives a new access
// token of one hour; the refresh answer carries no refresh token.
func TestToken_Refresh(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)

		online := f.exchange(client, secret, f.code(authParams(client, "svc.job.READ")).Get("code"), callback)
		if strings.Contains(online.body, "refresh_token") {
			t.Errorf("access_type online answered with a refresh token: %s", online.body)
		}

		tok := f.exchange(client, secret, f.code(authParams(client, "svc.job.READ", "access_type", "offline")).Get("code"), callback).tokens(t)
		refresh := func() *response {
			return f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"refresh_token"},
				"refresh_token": {tok.RefreshToken}, "client_id": {client.ID}, "client_secret": {secret}})
		}
		var seen []string
		for i := 0; i < 2; i++ {
			r := refresh()
			if strings.Contains(r.body, "refresh_token") {
				t.Errorf("the refresh answer carries a refresh token: %s", r.body)
			}
			next := r.tokens(t)
			if next.TokenType != "Bearer" || next.ExpiresIn != 3600 || next.Scope != "svc.job.READ" {
				t.Errorf("refresh answer = %+v", next)
			}
			if s := f.apiStatus("/api/v1/jobs", next.AccessToken); s != http.StatusOK {
				t.Errorf("refreshed access token answers %d", s)
			}
			seen = append(seen, next.AccessToken)
		}
		if seen[0] == seen[1] || seen[0] == tok.AccessToken {
			t.Error("refresh handed out an access token twice")
		}
		if s := f.apiStatus("/api/v1/jobs", tok.AccessToken); s != http.StatusOK {
			t.Errorf("the first access token stopped working after refresh: %d", s)
		}

		// Another client may not use it.
		other, otherSecret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		r := f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"refresh_token"},
			"refresh_token": {tok.RefreshToken}, "client_id": {other.ID}, "client_secret": {otherSecret}})
		if code, _ := r.oauthError(t); code != "invalid_grant" {
			t.Errorf("another client's refresh: %d %s, want invalid_grant", r.status, r.body)
		}
	})
}

// TestRevoke: revoking a refresh token (the interface's call carries only the
// token) ends it and every access token made from it.
func TestRevoke(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		tok := f.exchange(client, secret, f.code(authParams(client, "svc.job.READ", "access_type", "offline")).Get("code"), callback).tokens(t)
		refreshed := f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"refresh_token"},
			"refresh_token": {tok.RefreshToken}, "client_id": {client.ID}, "client_secret": {secret}}).tokens(t)
		bystander := f.issue(f.srv, client, f.admin, true, "svc.job.READ")

		// Wrong client credentials are refused and revoke nothing.
		other, otherSecret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		for _, creds := range []url.Values{
			{"client_id": {client.ID}, "client_secret": {"wrong"}},
			{"client_id": {other.ID}, "client_secret": {otherSecret}},
		} {
			creds.Set("token", tok.RefreshToken)
			if r := f.tokenCall("/oauth/v2/token/revoke", nil, creds); r.status == http.StatusOK {
				t.Errorf("revoke with credentials %v: 200", creds.Get("client_id"))
			} else {
				r.oauthError(t)
			}
		}
		if s := f.apiStatus("/api/v1/jobs", tok.AccessToken); s != http.StatusOK {
			t.Fatalf("a refused revocation revoked: %d", s)
		}

		if r := f.tokenCall("/oauth/v2/token/revoke", url.Values{"token": {tok.RefreshToken}}, nil); r.status != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.status, r.body)
		}
		for _, access := range []string{tok.AccessToken, refreshed.AccessToken} {
			if s := f.apiStatus("/api/v1/jobs", access); s != http.StatusUnauthorized {
				t.Errorf("an access token of the revoked refresh token answers %d, want 401", s)
			}
		}
		r := f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"refresh_token"},
			"refresh_token": {tok.RefreshToken}, "client_id": {client.ID}, "client_secret": {secret}})
		if code, _ := r.oauthError(t); code != "invalid_grant" {
			t.Errorf("revoked refresh token: %d %s, want invalid_grant", r.status, r.body)
		}
		if s := f.apiStatus("/api/v1/jobs", bystander.AccessToken); s != http.StatusOK {
			t.Errorf("another grant's token was revoked too: %d", s)
		}

		// Revoking an access token ends it alone; unknown tokens are fine.
		if r := f.tokenCall("/oauth/v2/token/revoke", nil, url.Values{"token": {bystander.AccessToken},
			"client_id": {client.ID}, "client_secret": {secret}}); r.status != http.StatusOK {
			t.Fatalf("revoke access token: %d %s", r.status, r.body)
		}
		if s := f.apiStatus("/api/v1/jobs", bystander.AccessToken); s != http.StatusUnauthorized {
			t.Errorf("revoked access token answers %d", s)
		}
		f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"refresh_token"},
			"refresh_token": {bystander.RefreshToken}, "client_id": {client.ID}, "client_secret": {secret}}).tokens(t)
		if r := f.tokenCall("/oauth/v2/token/revoke", nil, url.Values{"token": {"no.such"}}); r.status != http.StatusOK {
			t.Errorf("revoke of an unknown token: %d, want 200", r.status)
		}
		if r := f.tokenCall("/oauth/v2/token/revoke", nil, url.Values{}); r.status != http.StatusBadRequest {
			t.Errorf("revoke without token: %d, want 400", r.status)
		}
	})
}

// TestRefreshTokenCap: a user holds at most 20 refresh tokens; the consent
// that makes the 21st deletes the first.
func TestRefreshTokenCap(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		var first, last string
		for i := 0; i < oauthstore.RefreshTokensPerUser; i++ {
			tok := f.issue(f.srv, client, f.admin, true, "svc.job.READ")
			if i == 0 {
				first = tok.RefreshToken
			}
			last = tok.RefreshToken
		}
		refresh := func(rt string) *response {
			return f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"refresh_token"},
				"refresh_token": {rt}, "client_id": {client.ID}, "client_secret": {secret}})
		}
		refresh(first).tokens(t)

		twentyFirst := f.exchange(client, secret, f.code(authParams(client, "svc.job.READ", "access_type", "offline")).Get("code"), callback).tokens(t)
		if r := refresh(first); r.status != http.StatusBadRequest {
			t.Errorf("the first refresh token after the 21st: %d %s, want 400 invalid_grant", r.status, r.body)
		}
		refresh(last).tokens(t)
		refresh(twentyFirst.RefreshToken).tokens(t)
	})
}

// TestValidate: only access tokens open the API; a refresh token, a forged
// or a garbage token do not.
func TestValidate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, _ := f.client(f.env.Org, oauthstore.ClientSelf)
		tok := f.issue(f.srv, client, f.admin, true, "svc.job.READ")
		p, err := f.srv.ValidateAccessToken(t.Context(), tok.AccessToken)
		if err != nil {
			t.Fatal(err)
		}
		want := auth.Principal{UserID: f.admin.ID, OrgID: f.env.Org.ID, ClientID: client.ID, Scopes: []string{"svc.job.READ"}}
		if p.UserID != want.UserID || p.OrgID != want.OrgID || p.ClientID != want.ClientID || strings.Join(p.Scopes, " ") != "svc.job.READ" {
			t.Errorf("principal = %+v, want %+v", p, want)
		}
		key, sig, _ := strings.Cut(tok.AccessToken, ".")
		otherCfg := f.cfg
		otherCfg.Secret = []byte(strings.Repeat("z", 32))
		otherSecret := f.issue(f.newServer(otherCfg), client, f.admin, false, "svc.job.READ").AccessToken
		for name, bad := range map[string]string{
			"refresh token":  tok.RefreshToken,
			"garbage":        "not a token",
			"forged key":     "AAAA" + key[4:] + "." + sig,
			"other secret":   otherSecret,
			"empty":          "",
			"signature only": "." + sig,
		} {
			if _, err := f.srv.ValidateAccessToken(t.Context(), bad); err == nil {
				t.Errorf("%s validated", name)
			}
		}
	})
}
