package api_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"iam/api/apitest"
	"iam/api/auth"
	"iam/api/oauth"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/oauthstore"
	"iam/models/sqldb"
	"iam/models/store"
)

// oauthTokens validates with the authorization server made after the API
// (it needs the API's URL as its issuer).
type oauthTokens struct{ srv atomic.Pointer[oauth.Server] }

func (o *oauthTokens) ValidateAccessToken(ctx context.Context, tok string) (*auth.Principal, error) {
	return o.srv.Load().ValidateAccessToken(ctx, tok)
}

// TestUsers_RealOAuthTokens calls the users and groups routes with access
// tokens issued by the real authorization server: scopes decide, and a
// token of another organization sees nothing.
func TestUsers_RealOAuthTokens(t *testing.T) {
	db := dbtest.SQLite(t)
	tokens := &oauthTokens{}
	env := apitest.New(t, db, apitest.Options{Tokens: tokens})
	srv, err := oauth.New(oauth.Config{Issuer: env.URL, Secret: []byte("users test secret of at least thirty-two bytes")}, oauth.Deps{Store: env.Store})
	if err != nil {
		t.Fatal(err)
	}
	tokens.srv.Store(srv)
	ctx := context.Background()
	issue := func(org *identity.Organization, scopes ...string) string {
		t.Helper()
		admin := &identity.User{OrgID: org.ID, Email: "admin-" + models.FormatID(sqldb.NewID()) + "@example.com", Role: identity.RoleAdmin, Status: identity.UserActive}
		if err := env.Store.Users.Create(ctx, admin, ""); err != nil {
			t.Fatal(err)
		}
		client := &oauthstore.OAuthClient{OrgID: org.ID, Name: "users test", HomepageURL: "https://app.example.com", Type: oauthstore.ClientSelf}
		if _, err := store.NewStore(db).OAuthClients.Create(ctx, client); err != nil {
			t.Fatal(err)
		}
		resp, err := srv.IssueToken(ctx, oauth.IssueRequest{ClientID: client.ID, OrgID: org.ID, UserID: admin.ID, Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		return resp.AccessToken
	}
	read := issue(env.Org, "svc.user.READ")
	write := issue(env.Org, "svc.user.WRITE", "svc.group.ALL")
	u := createUser(t, env, write, map[string]any{"firstName": "Real", "email": "real@example.com"})
	if resp := env.Get("/api/v1/users/"+u.ID, read); resp.Status != http.StatusOK {
		t.Errorf("GET with a real READ token: %d %s", resp.Status, resp.Body)
	}
	wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/users", Token: read, Body: map[string]any{"firstName": "x", "email": "x@example.com"}}), 403, "00000102", "")
	groupReq(t, env, "POST", "/api/v1/groups", write, map[string]any{"name": "Real", "members": []string{u.ID}}, 201)
	other := issue(env.NewOrg("Other"), "svc.user.ALL")
	wantError(t, env.Get("/api/v1/users/"+u.ID, other), 404, "00000103", "")
	wantError(t, env.Get("/api/v1/users", "not-a-token"), 401, "00000101", "")
}
