package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/modeltest"
	"iam/models/oauthstore"
	"iam/models/protection"
	"iam/models/store"
)

// TestAudit_SignIn: a successful sign-in records oauth.signin.succeeded
// (the user its actor and target); every refused one records one
// oauth.signin.failed (FAILURE, its reason the refusal's class), naming the
// user when the email is an account's, then the client, and never the
// password or an email that is no account's.
func TestAudit_SignIn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		org := f.env.Org.ID
		settings := protection.DefaultAdminSettings()
		settings.AccountBlocking.FailedAttemptsThreshold = 2
		if err := store.NewStore(db).Settings.Put(context.Background(), org, &settings); err != nil {
			t.Fatal(err)
		}
		client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
		authURL := f.authURL(authParams(client, "svc.job.READ"))

		if r := f.browser().signIn(authURL, f.user.Email, adminPassword); r.status != http.StatusSeeOther {
			t.Fatalf("sign-in: %d %s", r.status, r.body)
		}
		ok := modeltest.EventsOfType(t, db, org, audit.OAuthSigninSucceeded)
		if len(ok) != 1 {
			t.Fatalf("oauth.signin.succeeded events: %+v", ok)
		}
		userID := models.FormatID(f.user.ID)
		if ev := ok[0]; ev.Actor.Type != models.ActorUser || ev.Actor.ID != userID || len(ev.Targets) != 1 ||
			ev.Targets[0].Type != identity.UserTargetType || ev.Targets[0].ID != userID || ev.Outcome.Result != models.ResultSuccess ||
			ev.RequestID == "" {
			t.Errorf("oauth.signin.succeeded = %+v", ev)
		}

		inactive := f.newUser(f.env.Org, "inactive@example.com", identity.RoleAdmin)
		if _, err := f.users.Update(context.Background(), org, inactive.ID, func(u *identity.User) error { u.Status = identity.UserInactive; return nil }, nil); err != nil {
			t.Fatal(err)
		}
		typed := []string{"typed wrong password one", "typed wrong password two", "nobody-typed-this@example.com"}
		b := f.browser()
		attempts := []struct {
			email, password string
			user            *identity.User // nil: the email is no account's
			reason          string
		}{
			{f.admin.Email, typed[0], f.admin, identity.SignInWrongPassword},
			{typed[2], adminPassword, nil, identity.SignInUnknownEmail},
			{f.admin.Email, typed[1], f.admin, identity.SignInBlockedNow},
			{f.admin.Email, adminPassword, f.admin, identity.SignInAccountBlocked},
			{inactive.Email, adminPassword, inactive, identity.SignInAccountInactive},
		}
		for _, a := range attempts {
			if r := b.signIn(authURL, a.email, a.password); r.status != http.StatusUnauthorized {
				t.Fatalf("sign-in of %s: %d, want 401", a.email, r.status)
			}
		}
		failed := modeltest.EventsOfType(t, db, org, audit.OAuthSigninFailed)
		if len(failed) != len(attempts) {
			t.Fatalf("%d oauth.signin.failed events, want %d: %+v", len(failed), len(attempts), failed)
		}
		clientTarget := models.EventTarget{Type: oauthstore.ClientTargetType, ID: client.ID, DisplayName: client.Name}
		for i, a := range attempts {
			ev := failed[i]
			if ev.Outcome.Result != models.ResultFailure || ev.Outcome.Reason != a.reason || ev.RequestID == "" {
				t.Errorf("attempt %d: outcome %+v (request %q), want FAILURE %q", i, ev.Outcome, ev.RequestID, a.reason)
			}
			want := []models.EventTarget{clientTarget}
			if a.user != nil {
				want = append([]models.EventTarget{{Type: identity.UserTargetType, ID: models.FormatID(a.user.ID), DisplayName: a.user.Email}}, want...)
				if ev.Actor.Type != models.ActorUser || ev.Actor.ID != models.FormatID(a.user.ID) {
					t.Errorf("attempt %d: actor %+v, want the user %d", i, ev.Actor, a.user.ID)
				}
			} else if ev.Actor.ID != "" {
				t.Errorf("attempt %d (unknown email): actor %+v names someone", i, ev.Actor)
			}
			if !sameTargets(ev.Targets, want) {
				t.Errorf("attempt %d: targets %+v, want %+v", i, ev.Targets, want)
			}
		}
		assertNoSecrets(t, db, append(typed, adminPassword))
	})
}

// TestAudit_Tokens: the token endpoint's grants (a code's exchange, a
// refresh), IssueToken, the revocation endpoint and a reused code's
// revocation record oauth.token.issued and oauth.token.revoked, the client
// their actor, naming the user, the client and the grant; no event holds a
// token, a code, a secret, a signature or a password.
func TestAudit_Tokens(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		org := f.env.Org.ID
		client, secret := f.client(f.env.Org, oauthstore.ClientServer, callback)
		code := f.code(authParams(client, "svc.job.READ", "access_type", "offline")).Get("code")
		tok := f.exchange(client, secret, code, callback).tokens(t)
		secrets := []string{secret, oauthstore.HashClientSecret(secret), code, tok.AccessToken, tok.RefreshToken, adminPassword}

		issued := modeltest.EventsOfType(t, db, org, audit.OAuthTokenIssued)
		if len(issued) != 2 {
			t.Fatalf("the exchange: %d oauth.token.issued events, want 2 (access, refresh): %+v", len(issued), issued)
		}
		grant := checkGrantEvent(t, "the exchange's access token", issued[0], f.admin, client, "", "access token")
		checkGrantEvent(t, "the exchange's refresh token", issued[1], f.admin, client, grant, "refresh token")

		refreshed := f.tokenCall("/oauth/v2/token", nil, url.Values{"grant_type": {"refresh_token"},
			"refresh_token": {tok.RefreshToken}, "client_id": {client.ID}, "client_secret": {secret}}).tokens(t)
		secrets = append(secrets, refreshed.AccessToken)
		issued = modeltest.EventsOfType(t, db, org, audit.OAuthTokenIssued)
		if len(issued) != 3 {
			t.Fatalf("the refresh: %d oauth.token.issued events, want 3", len(issued))
		}
		checkGrantEvent(t, "the refresh grant's access token", issued[2], f.admin, client, grant, "access token")

		if r := f.tokenCall("/oauth/v2/token/revoke", nil, url.Values{"token": {tok.RefreshToken}}); r.status != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.status, r.body)
		}
		revoked := modeltest.EventsOfType(t, db, org, audit.OAuthTokenRevoked)
		if len(revoked) != 1 {
			t.Fatalf("revoking the refresh token: %d oauth.token.revoked events, want 1: %+v", len(revoked), revoked)
		}
		checkGrantEvent(t, "the refresh token's revocation", revoked[0], f.admin, client, grant, "refresh token and 2 access tokens")
		// An unknown token is answered 200 and changes nothing.
		if r := f.tokenCall("/oauth/v2/token/revoke", nil, url.Values{"token": {tok.RefreshToken}}); r.status != http.StatusOK {
			t.Fatalf("revoke again: %d %s", r.status, r.body)
		}
		if n := len(modeltest.EventsOfType(t, db, org, audit.OAuthTokenRevoked)); n != 1 {
			t.Errorf("revoking a revoked token: %d oauth.token.revoked events, want still 1", n)
		}

		// IssueToken (`iam token`) records its token too; revoking the
		// access token alone records its revocation.
		self := f.issue(f.srv, client, f.admin, false, "svc.job.READ")
		secrets = append(secrets, self.AccessToken)
		issued = modeltest.EventsOfType(t, db, org, audit.OAuthTokenIssued)
		if len(issued) != 4 {
			t.Fatalf("IssueToken: %d oauth.token.issued events, want 4", len(issued))
		}
		selfGrant := checkGrantEvent(t, "IssueToken's access token", issued[3], f.admin, client, "", "access token")
		if r := f.tokenCall("/oauth/v2/token/revoke", nil, url.Values{"token": {self.AccessToken}}); r.status != http.StatusOK {
			t.Fatalf("revoke the access token: %d %s", r.status, r.body)
		}
		revoked = modeltest.EventsOfType(t, db, org, audit.OAuthTokenRevoked)
		if len(revoked) != 2 {
			t.Fatalf("revoking an access token: %d oauth.token.revoked events, want 2", len(revoked))
		}
		checkGrantEvent(t, "the access token's revocation", revoked[1], f.admin, client, selfGrant, "access token")

		// A code used twice revokes what its first exchange issued.
		code2 := f.code(authParams(client, "svc.job.READ", "access_type", "offline")).Get("code")
		first := f.exchange(client, secret, code2, callback).tokens(t)
		secrets = append(secrets, code2, first.AccessToken, first.RefreshToken)
		if r := f.exchange(client, secret, code2, callback); r.status != http.StatusBadRequest {
			t.Fatalf("the code's second use: %d", r.status)
		}
		revoked = modeltest.EventsOfType(t, db, org, audit.OAuthTokenRevoked)[2:]
		if len(revoked) != 2 {
			t.Fatalf("a reused code: %d oauth.token.revoked events, want 2 (its access and its refresh token): %+v", len(revoked), revoked)
		}
		reused := revoked[0].Targets[2].ID
		checkGrantEvent(t, "the reused code's access token", revoked[0], f.admin, client, reused, "access token")
		checkGrantEvent(t, "the reused code's refresh token", revoked[1], f.admin, client, reused, "refresh token")

		// The endpoints' events carry their request's id; IssueToken's has
		// no request.
		for _, typ := range []string{audit.OAuthTokenIssued, audit.OAuthTokenRevoked} {
			for _, ev := range modeltest.EventsOfType(t, db, org, typ) {
				if ev.RequestID == "" && ev.Targets[2].ID != selfGrant {
					t.Errorf("%s of grant %s has no request id", typ, ev.Targets[2].ID)
				}
			}
		}

		var sigs []string
		if err := db.NewSelect().Table("oauth_tokens").Column("signature").Scan(context.Background(), &sigs); err != nil {
			t.Fatal(err)
		}
		if len(sigs) == 0 {
			t.Fatal("no token rows left to compare the events with")
		}
		assertNoSecrets(t, db, append(secrets, sigs...))
	})
}

// checkGrantEvent checks a token event: the client its actor, the user,
// the client and the grant (want, when not empty; what its display name)
// its targets. It returns the grant's id.
func checkGrantEvent(t *testing.T, what string, ev models.EventRecord, user *identity.User, client *oauthstore.OAuthClient, grant, tokens string) string {
	t.Helper()
	// A reused code's revocation happens before fosite has loaded the
	// client: its actor is named by its id.
	if ev.Actor.Type != models.ActorClient || ev.Actor.ID != client.ID ||
		(ev.Actor.DisplayName != client.Name && (ev.EventType != audit.OAuthTokenRevoked || ev.Actor.DisplayName != client.ID)) {
		t.Errorf("%s: actor %+v, want the client %s", what, ev.Actor, client.ID)
	}
	if ev.Outcome.Result != models.ResultSuccess {
		t.Errorf("%s: outcome %+v", what, ev.Outcome)
	}
	if len(ev.Targets) != 3 {
		t.Fatalf("%s: targets %+v, want the user, the client and the grant", what, ev.Targets)
	}
	want := []models.EventTarget{
		{Type: identity.UserTargetType, ID: models.FormatID(user.ID), DisplayName: user.Email},
		{Type: oauthstore.ClientTargetType, ID: client.ID, DisplayName: client.Name},
	}
	if !sameTargets(ev.Targets[:2], want) {
		t.Errorf("%s: targets %+v, want %+v first", what, ev.Targets, want)
	}
	g := ev.Targets[2]
	if g.Type != oauthstore.GrantTargetType || g.ID == "" || (grant != "" && g.ID != grant) || g.DisplayName != tokens {
		t.Errorf("%s: grant %+v, want %s %q (%s)", what, g, oauthstore.GrantTargetType, grant, tokens)
	}
	return g.ID
}

func sameTargets(got, want []models.EventTarget) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Type != want[i].Type || got[i].ID != want[i].ID || got[i].DisplayName != want[i].DisplayName || len(got[i].Changes) != 0 {
			return false
		}
	}
	return true
}

// assertNoSecrets fails when any audit event of the database holds one of
// secrets.
func assertNoSecrets(t *testing.T, db *bun.DB, secrets []string) {
	t.Helper()
	var bodies []string
	if err := db.NewSelect().Table("audit_events").Column("body").Scan(context.Background(), &bodies); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, b := range bodies {
			if strings.Contains(b, s) {
				t.Errorf("an audit event holds the secret %q: %s", s, b)
			}
		}
	}
}
