package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/api/oauth"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/oauthstore"
	"iam/models/secret"
	"iam/models/sqldb"
)

// stateTTL is the user state cache bound of the revocation tests' server.
const stateTTL = 150 * time.Millisecond

// TestTokens_EndWithTheUser: real tokens (an access token and a refresh
// token from the authorization server) of an admin stop working once the
// admin's password changes, the admin is deactivated, deleted, demoted or
// blocked, whichever way the change is made. Password change, deactivation,
// deletion and demotion revoke: the tokens stay dead after the change is
// undone. A block suspends them while it lasts.
func TestTokens_EndWithTheUser(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, func(c *oauth.Config) { c.UserStateTTL = stateTTL })
		ctx := context.Background()
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		setUser := func(victim *identity.User, column string, value any) {
			t.Helper()
			if _, err := db.NewUpdate().Table("users").Set("? = ?", bun.Ident(column), value).Where("id = ?", victim.ID).Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		update := func(victim *identity.User, change identity.UserChange, password *string) {
			t.Helper()
			if _, err := f.users.Update(ctx, victim.OrgID, victim.ID, change, password); err != nil {
				t.Fatal(err)
			}
		}
		patch := func(victim *identity.User, body map[string]any) {
			t.Helper()
			resp := f.env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/users/" + models.FormatID(victim.ID), Token: f.operatorToken(), Body: body})
			if resp.Status != http.StatusOK {
				t.Fatalf("PATCH %v: %d %s", body, resp.Status, resp.Body)
			}
		}
		newPassword := "a brand new password"
		cases := []struct {
			name    string
			change  func(victim *identity.User)
			undo    func(victim *identity.User) // nil: nothing to undo
			revokes bool                        // the tokens stay dead after undo
		}{
			{name: "password changed", change: func(v *identity.User) { update(v, func(*identity.User) error { return nil }, &newPassword) }, revokes: true},
			{name: "password removed", change: func(v *identity.User) { empty := ""; update(v, func(*identity.User) error { return nil }, &empty) }, revokes: true},
			{
				name:    "deactivated through the API",
				change:  func(v *identity.User) { patch(v, map[string]any{"status": 0}) },
				undo:    func(v *identity.User) { patch(v, map[string]any{"status": 1}) },
				revokes: true,
			},
			{
				name: "deleted through the API",
				change: func(v *identity.User) {
					resp := f.env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/users/" + models.FormatID(v.ID), Token: f.operatorToken()})
					if resp.Status != http.StatusNoContent {
						t.Fatalf("DELETE: %d %s", resp.Status, resp.Body)
					}
				},
				revokes: true,
			},
			{
				name: "demoted",
				change: func(v *identity.User) {
					update(v, func(u *identity.User) error { u.Role = identity.RoleUser; return nil }, nil)
				},
				undo: func(v *identity.User) {
					update(v, func(u *identity.User) error { u.Role = identity.RoleAdmin; return nil }, nil)
				},
				revokes: true,
			},
			{
				name:   "demoted outside the store (SQL)",
				change: func(v *identity.User) { setUser(v, "role", "user") },
			},
			{
				name:   "deactivated outside the store (SQL)",
				change: func(v *identity.User) { setUser(v, "status", 0) },
			},
			{
				name:   "blocked",
				change: func(v *identity.User) { setUser(v, "blocked_until", time.Now().Add(time.Hour).UTC()) },
				undo:   func(v *identity.User) { setUser(v, "blocked_until", nil) },
			},
		}
		for i, tc := range cases {
			victim := f.newUser(f.env.Org, "victim"+string(rune('a'+i))+"@example.com", identity.RoleAdmin)
			tok := f.issue(f.srv, client, victim, true, "svc.user.READ")
			refresh := func() *response {
				return f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"refresh_token"},
					"refresh_token": {tok.RefreshToken}, "client_id": {client.ID}, "client_secret": {secret}})
			}
			if got := f.apiStatus("/api/v1/users", tok.AccessToken); got != http.StatusOK {
				t.Fatalf("%s: before the change the token gets %d", tc.name, got)
			}
			tc.change(victim)
			time.Sleep(stateTTL + 50*time.Millisecond)
			if got := f.apiStatus("/api/v1/users", tok.AccessToken); got != http.StatusUnauthorized {
				t.Errorf("%s: the old access token gets %d, want 401", tc.name, got)
			}
			if r := refresh(); r.status != http.StatusBadRequest || !strings.Contains(r.body, "invalid_grant") {
				t.Errorf("%s: refresh answers %d %s, want 400 invalid_grant", tc.name, r.status, r.body)
			}
			if tc.undo == nil {
				continue
			}
			tc.undo(victim)
			time.Sleep(stateTTL + 50*time.Millisecond)
			want := http.StatusOK
			if tc.revokes {
				want = http.StatusUnauthorized
			}
			if got := f.apiStatus("/api/v1/users", tok.AccessToken); got != want {
				t.Errorf("%s, undone: the old access token gets %d, want %d", tc.name, got, want)
			}
			if r := refresh(); tc.revokes != (r.status == http.StatusBadRequest) {
				t.Errorf("%s, undone: refresh answers %d %s (revoked: %v)", tc.name, r.status, r.body, tc.revokes)
			}
			if tc.revokes {
				fresh := f.issue(f.srv, client, victim, false, "svc.user.READ")
				if got := f.apiStatus("/api/v1/users", fresh.AccessToken); got != http.StatusOK {
					t.Errorf("%s, undone: a token issued afterwards gets %d", tc.name, got)
				}
			}
		}
	})
}

// TestTokens_PasswordChangeEndsSignIns: a browser signed in as a user is
// signed out when the user's password changes through the API (PATCH), so
// the consent page is not reached with the old sign-in.
func TestTokens_PasswordChangeEndsSignIns(t *testing.T) {
	f := newFixture(t, dbtest.SQLite(t), false, nil)
	client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
	authURL := f.authURL(authParams(client, "svc.job.READ"))
	b := f.browser()
	if r := b.signIn(authURL, f.user.Email, adminPassword); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", r.status, r.body)
	}
	if r := b.get(authURL); r.status != http.StatusSeeOther { // signed in: a plain user may grant nothing
		t.Fatalf("signed in, GET auth: %d, want the access_denied redirect", r.status)
	}
	resp := f.env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/users/" + models.FormatID(f.user.ID), Token: f.operatorToken(),
		Body: map[string]any{"password": "another good password"}})
	if resp.Status != http.StatusOK {
		t.Fatalf("PATCH password: %d %s", resp.Status, resp.Body)
	}
	if r := b.get(authURL); r.status != http.StatusOK || !strings.Contains(r.body, `action="/oauth/v2/login"`) {
		t.Errorf("after the password change the browser is still signed in: %d %s", r.status, r.body)
	}
}

// TestUsers_AdminPasswordRefusedThroughTheAPI: a token allowed to update
// users cannot set (or remove) an administrator's password, whatever its
// scopes; the admin's tokens keep working and the password is unchanged.
// A plain user's password can be set.
func TestUsers_AdminPasswordRefusedThroughTheAPI(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
		adminTok := f.issue(f.srv, client, f.admin, false, "svc.user.READ")
		for _, scopes := range [][]string{{"svc.user.UPDATE"}, {"svc.user.WRITE"}, {"svc.user.ALL"}} {
			tok := f.issue(f.srv, client, f.newUser(f.env.Org, "app-"+strings.ToLower(strings.ReplaceAll(scopes[0], ".", "-"))+"@example.com", identity.RoleAdmin), false, scopes...)
			for _, pw := range []string{"attacker chosen password", ""} {
				resp := f.env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/users/" + models.FormatID(f.admin.ID), Token: tok.AccessToken,
					Body: map[string]any{"password": pw, "displayName": "Owned"}})
				if resp.Status != http.StatusForbidden || resp.ErrorBody(t).Code != "00000102" {
					t.Errorf("%v: PATCH an admin's password %q: %d %s, want 403 Access Denied", scopes, pw, resp.Status, resp.Body)
				}
			}
			resp := f.env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/users/" + models.FormatID(f.user.ID), Token: tok.AccessToken,
				Body: map[string]any{"password": "a plain user's new one"}}) //nolint:gosec // G101: a test's password
			if resp.Status != http.StatusOK {
				t.Errorf("%v: PATCH a plain user's password: %d %s", scopes, resp.Status, resp.Body)
			}
		}
		got, err := f.users.Get(context.Background(), f.admin.OrgID, f.admin.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.DisplayName == "Owned" || !secret.VerifyPassword(got.PasswordHash, adminPassword) {
			t.Error("the refused PATCH changed the admin")
		}
		if s := f.apiStatus("/api/v1/users", adminTok.AccessToken); s != http.StatusOK {
			t.Errorf("the admin's token after the refused PATCH: %d", s)
		}
	})
}

// operatorToken is a real token of a fresh admin holding svc.user.ALL.
func (f *fixture) operatorToken() string {
	f.t.Helper()
	client, _ := f.client(f.env.Org, oauthstore.ClientSelf)
	op := f.newUser(f.env.Org, "operator-"+models.FormatID(sqldb.NewID())+"@example.com", identity.RoleAdmin)
	return f.issue(f.srv, client, op, false, "svc.user.ALL").AccessToken
}

// TestAttack_NarrowAndForeignTokens: what an attacker holding real tokens
// tries. Another organization's admin token cannot reach (404) or change an
// admin's password; a token without user scopes cannot PATCH at all (403);
// a refresh token revoked by a password change does not come back when the
// admin is reactivated, nor do its access tokens.
func TestAttack_NarrowAndForeignTokens(t *testing.T) {
	f := newFixture(t, dbtest.SQLite(t), false, func(c *oauth.Config) { c.UserStateTTL = stateTTL })
	ctx := context.Background()
	client, clientSecret := f.client(f.env.Org, oauthstore.ClientServer, callback)
	adminPath := "/api/v1/users/" + models.FormatID(f.admin.ID)

	orgB := f.env.NewOrg("B")
	clientB, _ := f.client(orgB, oauthstore.ClientSelf)
	foreign := f.issue(f.srv, clientB, f.newUser(orgB, "admin-b@example.com", identity.RoleAdmin), false, "svc.user.ALL").AccessToken
	for _, req := range []apitest.Request{
		{Method: "PATCH", Path: adminPath, Token: foreign, Body: map[string]any{"password": "taken over by org B"}},
		{Method: "PATCH", Path: adminPath, Token: foreign, Body: map[string]any{"status": 0}},
		{Method: "GET", Path: adminPath, Token: foreign},
		{Method: "DELETE", Path: adminPath, Token: foreign},
	} {
		if resp := f.env.Do(req); resp.Status != http.StatusNotFound {
			t.Errorf("org B's token %s %s: %d %s, want 404", req.Method, req.Path, resp.Status, resp.Body)
		}
	}
	narrow := f.issue(f.srv, client, f.newUser(f.env.Org, "groups-app@example.com", identity.RoleAdmin), false, "svc.group.READ").AccessToken
	if resp := f.env.Do(apitest.Request{Method: "PATCH", Path: adminPath, Token: narrow, Body: map[string]any{"password": "narrow token"}}); resp.Status != http.StatusForbidden {
		t.Errorf("svc.group.READ PATCH: %d, want 403", resp.Status)
	}
	got, err := f.users.Get(ctx, f.admin.OrgID, f.admin.ID)
	if err != nil || !secret.VerifyPassword(got.PasswordHash, adminPassword) || got.Status != identity.UserActive {
		t.Fatalf("the admin changed: %+v %v", got, err)
	}

	// A stolen refresh token, then the owner's password is reset (by the
	// operator, outside the API) and the account deactivated and reactivated.
	stolen := f.issue(f.srv, client, f.admin, true, "svc.user.READ")
	pw := "reset by the operator" //nolint:gosec // G101: a test's password
	if _, err := f.users.Update(ctx, f.admin.OrgID, f.admin.ID, func(*identity.User) error { return nil }, &pw); err != nil {
		t.Fatal(err)
	}
	op := f.operatorToken()
	for _, status := range []int{0, 1} {
		if resp := f.env.Do(apitest.Request{Method: "PATCH", Path: adminPath, Token: op, Body: map[string]any{"status": status}}); resp.Status != http.StatusOK {
			t.Fatalf("PATCH status %d: %d %s", status, resp.Status, resp.Body)
		}
	}
	time.Sleep(stateTTL + 50*time.Millisecond)
	r := f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"refresh_token"},
		"refresh_token": {stolen.RefreshToken}, "client_id": {client.ID}, "client_secret": {clientSecret}})
	if code, _ := r.oauthError(t); code != "invalid_grant" {
		t.Errorf("the stolen refresh token after the reset: %d %s", r.status, r.body)
	}
	if s := f.apiStatus("/api/v1/users", stolen.AccessToken); s != http.StatusUnauthorized {
		t.Errorf("the stolen access token after the reset: %d", s)
	}
}
