package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/ory/fosite"
	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/modeltest"
	"iam/models/oauthstore"
	"iam/models/store"
)

// oauthFixture is an organization with a user and a client, for the OAuth
// storage tests.
type oauthFixture struct {
	store  *storage
	org    *identity.Organization
	user   *identity.User
	client *oauthstore.OAuthClient
}

func newOAuthFixture(t *testing.T, db *bun.DB) *oauthFixture {
	t.Helper()
	ctx := t.Context()
	store := store.NewStore(db)
	f := &oauthFixture{store: &storage{tokens: store.OAuthTokens, clients: store.OAuthClients}}
	f.org = &identity.Organization{Name: "Org"}
	if err := store.Orgs.Create(ctx, f.org); err != nil {
		t.Fatal(err)
	}
	f.user = newStoredUser(t, db, f.org.ID, "admin@example.com", identity.RoleAdmin)
	f.client = &oauthstore.OAuthClient{OrgID: f.org.ID, Name: "App", HomepageURL: "https://app.example.com",
		Type: oauthstore.ClientServer, RedirectURIs: []string{"https://app.example.com/cb"}}
	if _, err := store.OAuthClients.Create(ctx, f.client); err != nil {
		t.Fatal(err)
	}
	return f
}

func newStoredUser(t *testing.T, db *bun.DB, orgID int64, email string, role identity.Role) *identity.User {
	t.Helper()
	u := &identity.User{OrgID: orgID, Email: email, Role: role, Status: identity.UserActive}
	if err := store.NewStore(db).Users.Create(t.Context(), u, "correct horse battery"); err != nil {
		t.Fatalf("create user %s: %v", email, err)
	}
	return u
}

// request builds a fosite request of the fixture's client for user, whose
// tokens of kind expire after ttl (zero: never).
func (f *oauthFixture) request(user *identity.User, kind fosite.TokenType, ttl time.Duration) *fosite.Request {
	sess := &fosite.DefaultSession{Subject: models.FormatID(user.ID), Username: user.Email}
	if ttl != 0 {
		sess.SetExpiresAt(kind, time.Now().UTC().Add(ttl).Round(time.Second))
	}
	req := fosite.NewRequest()
	req.Client = fositeClient{f.client}
	req.Session = sess
	req.SetRequestedScopes(fosite.Arguments{"svc.job.READ", "offline_access"})
	req.GrantScope("svc.job.READ")
	req.GrantScope("offline_access")
	req.Form = url.Values{"redirect_uri": {"https://app.example.com/cb"}}
	return req
}

func TestStorage_AuthorizeCode(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newOAuthFixture(t, db)
		req := f.request(f.user, fosite.AuthorizeCode, time.Minute)
		if err := f.store.CreateAuthorizeCodeSession(ctx, "code-sig", req); err != nil {
			t.Fatalf("create: %v", err)
		}

		got, err := f.store.GetAuthorizeCodeSession(ctx, "code-sig", new(fosite.DefaultSession))
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.GetID() != req.GetID() || got.GetClient().GetID() != f.client.ID {
			t.Errorf("got request %s of client %s, want %s of %s", got.GetID(), got.GetClient().GetID(), req.GetID(), f.client.ID)
		}
		if got.GetSession().GetSubject() != models.FormatID(f.user.ID) {
			t.Errorf("session subject = %q, want the user id", got.GetSession().GetSubject())
		}
		if exp := got.GetSession().GetExpiresAt(fosite.AuthorizeCode); time.Until(exp) < 50*time.Second || time.Until(exp) > 70*time.Second {
			t.Errorf("code expiry %v is not about a minute ahead", exp)
		}
		if !got.GetGrantedScopes().Has("svc.job.READ") || got.GetRequestForm().Get("redirect_uri") != "https://app.example.com/cb" {
			t.Errorf("scopes %v, form %v not kept", got.GetGrantedScopes(), got.GetRequestForm())
		}

		if err = f.store.InvalidateAuthorizeCodeSession(ctx, "code-sig"); err != nil {
			t.Fatalf("invalidate: %v", err)
		}
		used, err := f.store.GetAuthorizeCodeSession(ctx, "code-sig", new(fosite.DefaultSession))
		if !errors.Is(err, fosite.ErrInvalidatedAuthorizeCode) || used == nil || used.GetID() != req.GetID() {
			t.Errorf("get of a used code = %v, %v; want its request and ErrInvalidatedAuthorizeCode", used, err)
		}
		if err := f.store.InvalidateAuthorizeCodeSession(ctx, "code-sig"); !errors.Is(err, fosite.ErrInvalidatedAuthorizeCode) {
			t.Errorf("second invalidate = %v, want ErrInvalidatedAuthorizeCode", err)
		}
		if _, err := f.store.GetAuthorizeCodeSession(ctx, "unknown", new(fosite.DefaultSession)); !errors.Is(err, fosite.ErrNotFound) {
			t.Errorf("get of an unknown code = %v, want ErrNotFound", err)
		}
	})
}

func TestStorage_TokensAndRevocation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newOAuthFixture(t, db)
		req := f.request(f.user, fosite.AccessToken, time.Hour)
		other := f.request(f.user, fosite.AccessToken, time.Hour)
		for sig, r := range map[string]*fosite.Request{"at-1": req, "at-2": req, "at-other": other} {
			if err := f.store.CreateAccessTokenSession(ctx, sig, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.store.CreateRefreshTokenSession(ctx, "rt-1", "at-1", req); err != nil {
			t.Fatal(err)
		}
		if got, err := f.store.GetRefreshTokenSession(ctx, "rt-1", new(fosite.DefaultSession)); err != nil || got.GetID() != req.GetID() {
			t.Fatalf("get refresh = %v, %v", got, err)
		}

		// Revoking the request removes its refresh and every access token made from it.
		if err := f.store.RevokeRefreshToken(ctx, req.GetID()); err != nil {
			t.Fatal(err)
		}
		if err := f.store.RevokeAccessToken(ctx, req.GetID()); err != nil {
			t.Fatal(err)
		}
		for _, sig := range []string{"at-1", "at-2"} {
			if _, err := f.store.GetAccessTokenSession(ctx, sig, new(fosite.DefaultSession)); !errors.Is(err, fosite.ErrNotFound) {
				t.Errorf("access token %s after revocation: %v, want ErrNotFound", sig, err)
			}
		}
		if _, err := f.store.GetRefreshTokenSession(ctx, "rt-1", new(fosite.DefaultSession)); !errors.Is(err, fosite.ErrNotFound) {
			t.Errorf("refresh token after revocation: %v, want ErrNotFound", err)
		}
		if _, err := f.store.GetAccessTokenSession(ctx, "at-other", new(fosite.DefaultSession)); err != nil {
			t.Errorf("another request's access token was revoked too: %v", err)
		}

		if err := f.store.DeleteAccessTokenSession(ctx, "at-other"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.GetAccessTokenSession(ctx, "at-other", new(fosite.DefaultSession)); !errors.Is(err, fosite.ErrNotFound) {
			t.Errorf("deleted access token: %v, want ErrNotFound", err)
		}
	})
}

func TestStorage_PKCE(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newOAuthFixture(t, db)
		req := f.request(f.user, fosite.AuthorizeCode, time.Minute)
		req.Form = url.Values{"code_challenge": {"abc"}, "code_challenge_method": {"S256"}}
		if err := f.store.CreatePKCERequestSession(ctx, "code-sig", req); err != nil {
			t.Fatal(err)
		}
		got, err := f.store.GetPKCERequestSession(ctx, "code-sig", new(fosite.DefaultSession))
		if err != nil || got.GetRequestForm().Get("code_challenge") != "abc" {
			t.Fatalf("get PKCE = %v, %v", got, err)
		}
		if err := f.store.DeletePKCERequestSession(ctx, "code-sig"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.GetPKCERequestSession(ctx, "code-sig", new(fosite.DefaultSession)); !errors.Is(err, fosite.ErrNotFound) {
			t.Errorf("deleted PKCE request: %v, want ErrNotFound", err)
		}
	})
}

// TestStorage_RefreshTokenCap: the 21st refresh token of a user deletes
// the first (spec 5, rule 3); another user's tokens stay.
func TestStorage_RefreshTokenCap(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newOAuthFixture(t, db)
		bystander := newStoredUser(t, db, f.org.ID, "other@example.com", identity.RoleAdmin)
		if err := f.store.CreateRefreshTokenSession(ctx, "bystander", "", f.request(bystander, fosite.RefreshToken, 0)); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= oauthstore.RefreshTokensPerUser; i++ {
			if err := f.store.CreateRefreshTokenSession(ctx, fmt.Sprintf("rt-%d", i), "", f.request(f.user, fosite.RefreshToken, 0)); err != nil {
				t.Fatal(err)
			}
		}
		if n, _ := f.store.tokens.CountRefreshTokens(ctx, f.user.ID); n != oauthstore.RefreshTokensPerUser {
			t.Fatalf("after %d refresh tokens the user holds %d", oauthstore.RefreshTokensPerUser, n)
		}
		if _, err := f.store.GetRefreshTokenSession(ctx, "rt-1", new(fosite.DefaultSession)); err != nil {
			t.Fatalf("the first token is gone before the cap is passed: %v", err)
		}

		if err := f.store.CreateRefreshTokenSession(ctx, "rt-21", "", f.request(f.user, fosite.RefreshToken, 0)); err != nil {
			t.Fatal(err)
		}
		if n, _ := f.store.tokens.CountRefreshTokens(ctx, f.user.ID); n != oauthstore.RefreshTokensPerUser {
			t.Errorf("after the 21st the user holds %d refresh tokens, want %d", n, oauthstore.RefreshTokensPerUser)
		}
		if _, err := f.store.GetRefreshTokenSession(ctx, "rt-1", new(fosite.DefaultSession)); !errors.Is(err, fosite.ErrNotFound) {
			t.Errorf("the first refresh token survived the 21st: %v", err)
		}
		for _, sig := range []string{"rt-2", "rt-21", "bystander"} {
			if _, err := f.store.GetRefreshTokenSession(ctx, sig, new(fosite.DefaultSession)); err != nil {
				t.Errorf("refresh token %s is gone: %v", sig, err)
			}
		}
	})
}

func TestStorage_Transaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newOAuthFixture(t, db)
		errBoom := errors.New("boom")
		err := f.store.InTx(ctx, func(ctx context.Context) error {
			if err := f.store.CreateAccessTokenSession(ctx, "in-tx", f.request(f.user, fosite.AccessToken, time.Hour)); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("InTx = %v, want the function's error", err)
		}
		if _, err := f.store.GetAccessTokenSession(ctx, "in-tx", new(fosite.DefaultSession)); !errors.Is(err, fosite.ErrNotFound) {
			t.Errorf("a rolled back token is there: %v", err)
		}
		if evs := modeltest.EventsOfType(t, db, f.org.ID, audit.OAuthTokenIssued); len(evs) != 0 {
			t.Errorf("a rolled back token has its event: %+v", evs)
		}

		// fosite's transaction commits its tokens with their events
		// (BeginTX, the writes, Commit), and a write outside one runs in a
		// transaction of its own with its event.
		txCtx, beginErr := f.store.BeginTX(ctx)
		if beginErr != nil {
			t.Fatal(beginErr)
		}
		if err := f.store.CreateAccessTokenSession(txCtx, "committed", f.request(f.user, fosite.AccessToken, time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := f.store.CreateRefreshTokenSession(txCtx, "committed-refresh", "committed", f.request(f.user, fosite.RefreshToken, 0)); err != nil {
			t.Fatal(err)
		}
		if n, _ := db.NewSelect().Table("audit_events").Where("org_id = ? AND event_type = ?", f.org.ID, audit.OAuthTokenIssued).Count(ctx); n != 0 {
			t.Errorf("%d events visible before the commit", n)
		}
		if err := f.store.Commit(txCtx); err != nil {
			t.Fatal(err)
		}
		if evs := modeltest.EventsOfType(t, db, f.org.ID, audit.OAuthTokenIssued); len(evs) != 2 {
			t.Errorf("after the commit: %d oauth.token.issued events, want 2", len(evs))
		}
		if err := f.store.DeleteAccessTokenSession(ctx, "committed"); err != nil {
			t.Fatal(err)
		}
		if evs := modeltest.EventsOfType(t, db, f.org.ID, audit.OAuthTokenRevoked); len(evs) != 1 || evs[0].Targets[2].DisplayName != "access token" {
			t.Errorf("a deleted access token: oauth.token.revoked events %+v", evs)
		}
		// The code and PKCE rows a grant consumes record nothing.
		if err := f.store.CreateAuthorizeCodeSession(ctx, "code", f.request(f.user, fosite.AuthorizeCode, time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := f.store.InvalidateAuthorizeCodeSession(ctx, "code"); err != nil {
			t.Fatal(err)
		}
		if n := len(modeltest.Events(t, db, f.org.ID)); n != 1+1+1+2+1 { // org, user, client, issued ×2, revoked
			t.Errorf("%d events of the organization, want 6: %+v", n, modeltest.Events(t, db, f.org.ID))
		}
	})
}

func TestStorage_PurgeExpired(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newOAuthFixture(t, db)
		if err := f.store.CreateAccessTokenSession(ctx, "old", f.request(f.user, fosite.AccessToken, -time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := f.store.CreateAccessTokenSession(ctx, "fresh", f.request(f.user, fosite.AccessToken, time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := f.store.CreateRefreshTokenSession(ctx, "forever", "", f.request(f.user, fosite.RefreshToken, 0)); err != nil {
			t.Fatal(err)
		}
		n, err := f.store.tokens.PurgeExpired(ctx, time.Now())
		if err != nil || n != 1 {
			t.Fatalf("PurgeExpired = %d, %v; want 1", n, err)
		}
		if _, err := f.store.GetAccessTokenSession(ctx, "fresh", new(fosite.DefaultSession)); err != nil {
			t.Errorf("a live token was purged: %v", err)
		}
		if _, err := f.store.GetRefreshTokenSession(ctx, "forever", new(fosite.DefaultSession)); err != nil {
			t.Errorf("a refresh token was purged: %v", err)
		}
	})
}

func TestStorage_GetClient(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newOAuthFixture(t, db)
		c, err := f.store.GetClient(ctx, f.client.ID)
		if err != nil || c.GetID() != f.client.ID || c.IsPublic() {
			t.Fatalf("GetClient = %v, %v", c, err)
		}
		if got := c.GetRedirectURIs(); len(got) != 1 || got[0] != "https://app.example.com/cb" {
			t.Errorf("redirect URIs = %v", got)
		}
		if _, err := f.store.GetClient(ctx, "nope"); !errors.Is(err, fosite.ErrNotFound) {
			t.Errorf("GetClient(unknown) = %v, want ErrNotFound", err)
		}
	})
}
