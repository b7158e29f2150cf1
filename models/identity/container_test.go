package identity_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/listing"
	"iam/models/modeltest"
	"iam/models/store"
)

func TestCheckContainer(t *testing.T) {
	good := []string{
		"OU=Sales,DC=example,DC=com",
		"ou=sales",
		"CN=Doe\\, John,OU=People,DC=example,DC=com",
		"OU=R\\26D+L=Berlin,DC=example",
		"OU=\\ lead and trail\\ ,DC=x",
		"OU=\\#hash,DC=x",
		"OU=a#b,DC=x",
		"2.5.4.11=Sales,DC=example",
		"OU=#04024869",
		"OU=Käse ✓,DC=example",
		"OU=semi\\3Bcolon,DC=x",
		"OU=,DC=x", // an empty value is allowed by RFC 4514
		"x-ms-attr=v",
	}
	for _, s := range good {
		if reason, ok := identity.CheckContainer(s); !ok {
			t.Errorf("CheckContainer(%q) refused: %s", s, reason)
		}
	}
	bad := map[string]string{
		"":                     "empty",
		"Sales":                "=",
		"OU=Sales,":            "separator",
		",OU=Sales":            "attribute type",
		"OU=Sales, DC=example": "attribute type", // a space after the comma starts the type
		"OU=Sales ,DC=example": "unescaped space",
		"OU= Sales":            "starting with an unescaped space",
		"OU=#zz":               "hex",
		"OU=#123":              "hex",
		"OU=a\"b":              "\"",
		"OU=a;b":               ";",
		"OU=a<b":               "<",
		"OU=a\\":               "backslash",
		"OU=a\\xb":             "backslash",
		"1OU=x":                "=",
		"01.2=x":               "numeric",
		"-OU=x":                "attribute type",
		"OU=a\x00b":            "NUL",
		"OU=a+":                "separator",
		"OU=\xff":              "UTF-8",
	}
	for s, want := range bad {
		reason, ok := identity.CheckContainer(s)
		if ok {
			t.Errorf("CheckContainer(%q) accepted", s)
		} else if !strings.Contains(reason, want) {
			t.Errorf("CheckContainer(%q) = %q, want a reason naming %q", s, reason, want)
		}
	}
}

func TestUserStore_Container(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		users := store.Users
		sales := modeltest.AddUser(t, users, org.ID, identity.User{Email: "s@example.com", Container: "OU=Sales,DC=example,DC=com"})
		modeltest.AddUser(t, users, org.ID, identity.User{Email: "e@example.com", Container: "OU=Eng,DC=example,DC=com"})
		modeltest.AddUser(t, users, org.ID, identity.User{Email: "n@example.com"})

		u := identity.User{OrgID: org.ID, Email: "bad@example.com", Status: 1, Container: "OU=Sales, DC=example"}
		wantInvalid(t, users.Create(ctx, &u, ""), "container")
		u = identity.User{OrgID: org.ID, Email: "long@example.com", Status: 1, Container: "OU=" + strings.Repeat("a", 1100)}
		wantInvalid(t, users.Create(ctx, &u, ""), "container")

		got, err := users.Get(ctx, org.ID, sales.ID)
		if err != nil || got.Container != "OU=Sales,DC=example,DC=com" {
			t.Fatalf("Get = %+v, %v", got, err)
		}
		p, err := listing.Parse(url.Values{"filter": {`container eq "OU=Sales,DC=example,DC=com"`}}, identity.UserListing)
		if err != nil {
			t.Fatal(err)
		}
		page, _, err := users.List(ctx, org.ID, identity.LicensingBoth, p)
		if err != nil || len(page) != 1 || page[0].ID != sales.ID {
			t.Fatalf("filter on container = %d users, %v; want the Sales user", len(page), err)
		}
		p, err = listing.Parse(url.Values{"sort": {"-container"}}, identity.UserListing)
		if err != nil {
			t.Fatal(err)
		}
		page, _, err = users.List(ctx, org.ID, identity.LicensingBoth, p)
		if err != nil || len(page) != 3 || page[0].Container != "OU=Sales,DC=example,DC=com" || page[2].Container != "" {
			t.Fatalf("sort -container = %+v, %v", page, err)
		}
	})
}
