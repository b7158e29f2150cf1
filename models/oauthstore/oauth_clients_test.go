package oauthstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/oauthstore"
	"iam/models/store"
)

func TestClientStore_Create(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		org := &identity.Organization{Name: "Org"}
		if err := store.NewStore(db).Orgs.Create(ctx, org); err != nil {
			t.Fatal(err)
		}
		clients := store.NewStore(db).OAuthClients

		server := &oauthstore.OAuthClient{OrgID: org.ID, Name: " Portal ", HomepageURL: "https://portal.example.com",
			Type: oauthstore.ClientServer, RedirectURIs: []string{"https://portal.example.com/cb", "http://127.0.0.1:9000/cb"}}
		secret, err := clients.Create(ctx, server)
		if err != nil {
			t.Fatalf("create server client: %v", err)
		}
		if len(secret) < 40 || server.ID == "" || server.Name != "Portal" {
			t.Fatalf("secret %q, id %q, name %q", secret, server.ID, server.Name)
		}
		got, err := clients.Get(ctx, server.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.SecretHash == "" || strings.Contains(got.SecretHash, secret) {
			t.Errorf("the stored secret hash %q is empty or holds the secret", got.SecretHash)
		}
		if !oauthstore.ClientSecretMatches(got.SecretHash, secret) || oauthstore.ClientSecretMatches(got.SecretHash, secret+"x") {
			t.Errorf("the stored hash does not match exactly the secret")
		}
		if len(got.RedirectURIs) != 2 || got.RedirectURIs[1] != "http://127.0.0.1:9000/cb" || got.OrgID != org.ID {
			t.Errorf("stored client = %+v", got)
		}

		mobile := &oauthstore.OAuthClient{OrgID: org.ID, Name: "App", Type: oauthstore.ClientMobile, RedirectURIs: []string{"com.example.app:/oauth"}}
		secret, err = clients.Create(ctx, mobile)
		if err != nil || secret != "" || !mobile.Type.Public() {
			t.Errorf("mobile client: secret %q, public %v, err %v; want a public client without secret", secret, mobile.Type.Public(), err)
		}
		self := &oauthstore.OAuthClient{OrgID: org.ID, Name: "Scripts", Type: oauthstore.ClientSelf}
		if secret, createErr := clients.Create(ctx, self); createErr != nil || secret == "" || self.Type.Public() {
			t.Errorf("self client: secret %q, err %v", secret, createErr)
		}

		list, err := clients.List(ctx, org.ID)
		if err != nil || len(list) != 3 {
			t.Fatalf("List = %d clients, %v", len(list), err)
		}
		if first, err := clients.FirstOfType(ctx, org.ID, oauthstore.ClientSelf); err != nil || first.ID != self.ID {
			t.Errorf("FirstOfType(self) = %v, %v", first, err)
		}
		if err := clients.Delete(ctx, org.ID+1, server.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("delete from another organization = %v, want ENOTFOUND", err)
		}
		if err := clients.Delete(ctx, org.ID, server.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := clients.Get(ctx, server.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("get after delete = %v, want ENOTFOUND", err)
		}
	})
}

func TestClientStore_CreateRefusesBadRegistrations(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := t.Context()
	org := &identity.Organization{Name: "Org"}
	if err := store.NewStore(db).Orgs.Create(ctx, org); err != nil {
		t.Fatal(err)
	}
	clients := store.NewStore(db).OAuthClients
	ok := oauthstore.OAuthClient{OrgID: org.ID, Name: "App", HomepageURL: "https://app.example.com", Type: oauthstore.ClientServer,
		RedirectURIs: []string{"https://app.example.com/cb"}}
	cases := []struct {
		name  string
		edit  func(c *oauthstore.OAuthClient)
		field string
	}{
		{"no name", func(c *oauthstore.OAuthClient) { c.Name = "  " }, "name"},
		{"unknown type", func(c *oauthstore.OAuthClient) { c.Type = "desktop" }, "type"},
		{"server without homepage", func(c *oauthstore.OAuthClient) { c.HomepageURL = "" }, "homepage_url"},
		{"homepage not http", func(c *oauthstore.OAuthClient) { c.HomepageURL = "ftp://x" }, "homepage_url"},
		{"no redirect URI", func(c *oauthstore.OAuthClient) { c.RedirectURIs = nil }, "redirect_uris"},
		{"relative redirect URI", func(c *oauthstore.OAuthClient) { c.RedirectURIs = []string{"/cb"} }, "redirect_uris"},
		{"fragment", func(c *oauthstore.OAuthClient) { c.RedirectURIs = []string{"https://app.example.com/cb#x"} }, "redirect_uris"},
		{"plain http", func(c *oauthstore.OAuthClient) { c.RedirectURIs = []string{"http://app.example.com/cb"} }, "redirect_uris"},
		{"private scheme on a server client", func(c *oauthstore.OAuthClient) { c.RedirectURIs = []string{"com.example:/cb"} }, "redirect_uris"},
		{"self client with redirect URI", func(c *oauthstore.OAuthClient) { c.Type = oauthstore.ClientSelf }, "redirect_uris"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			c.RedirectURIs = append([]string(nil), ok.RedirectURIs...)
			tc.edit(&c)
			_, err := clients.Create(ctx, &c)
			var me *models.Error
			if models.ErrorCode(err) != models.EINVALID || !errors.As(err, &me) || me.Field != tc.field {
				t.Errorf("Create = %v, want EINVALID on %s", err, tc.field)
			}
		})
	}
}
