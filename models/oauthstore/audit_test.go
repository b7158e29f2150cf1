package oauthstore_test

import (
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/modeltest"
	"iam/models/oauthstore"
	"iam/models/store"
)

// TestClientStore_AuditEvents: registering a client records
// oauth.client.created naming it (never its secret or the secret's hash),
// deleting it oauth.client.deleted; a refused registration or delete
// records nothing.
func TestClientStore_AuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		s := store.NewStore(db)
		org, other := modeltest.NewOrg(t, s), modeltest.NewOrg(t, s)
		clients := s.OAuthClients

		c := &oauthstore.OAuthClient{OrgID: org.ID, Name: "Portal", HomepageURL: "https://portal.example.com",
			Type: oauthstore.ClientServer, RedirectURIs: []string{"https://portal.example.com/cb"}}
		secret, err := clients.Create(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		want := models.EventTarget{Type: oauthstore.ClientTargetType, ID: c.ID, DisplayName: "Portal"}
		created := modeltest.EventsOfType(t, db, org.ID, audit.OAuthClientCreated)
		if len(created) != 1 || len(created[0].Targets) != 1 || !sameTarget(created[0].Targets[0], want) {
			t.Fatalf("oauth.client.created events = %+v", created)
		}
		var bodies []string
		if err = db.NewSelect().Table("audit_events").Column("body").Scan(ctx, &bodies); err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			if strings.Contains(b, secret) || strings.Contains(b, oauthstore.HashClientSecret(secret)) {
				t.Errorf("an event holds the client's secret or its hash: %s", b)
			}
		}

		if _, err = clients.Create(ctx, &oauthstore.OAuthClient{OrgID: org.ID, Name: " ", Type: oauthstore.ClientSelf}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("a client without name = %v", err)
		}
		if err = clients.Delete(ctx, other.ID, c.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("delete from another organization = %v", err)
		}
		if err = clients.Delete(ctx, org.ID, c.ID); err != nil {
			t.Fatal(err)
		}
		if err = clients.Delete(ctx, org.ID, c.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("second delete = %v", err)
		}
		deleted := modeltest.EventsOfType(t, db, org.ID, audit.OAuthClientDeleted)
		if len(deleted) != 1 || len(deleted[0].Targets) != 1 || !sameTarget(deleted[0].Targets[0], want) {
			t.Errorf("oauth.client.deleted events = %+v", deleted)
		}
		if n := len(modeltest.EventsOfType(t, db, org.ID, audit.OAuthClientCreated)); n != 1 {
			t.Errorf("%d oauth.client.created events after a refused registration, want 1", n)
		}
		for _, typ := range []string{audit.OAuthClientCreated, audit.OAuthClientDeleted} {
			if evs := modeltest.EventsOfType(t, db, other.ID, typ); len(evs) != 0 {
				t.Errorf("the other organization has %s events: %+v", typ, evs)
			}
		}
	})
}

func sameTarget(a, b models.EventTarget) bool {
	return a.Type == b.Type && a.ID == b.ID && a.DisplayName == b.DisplayName
}
