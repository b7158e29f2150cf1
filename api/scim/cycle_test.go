package scim_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/modeltest"
)

const (
	userSchema       = "urn:ietf:params:scim:schemas:core:2.0:User"
	enterpriseSchema = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
	groupSchema      = "urn:ietf:params:scim:schemas:core:2.0:Group"
	patchSchema      = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
)

func patch(ops ...obj) obj {
	list := make([]any, len(ops))
	for i := range ops {
		list[i] = ops[i]
	}
	return obj{"schemas": []any{patchSchema}, "Operations": list}
}

// TestSCIM_EntraCycle drives a provisioning cycle the way Microsoft Entra
// ID's provisioning service sends it: matching by userName then
// externalId, PATCH ops in title case, booleans as strings, value-filter
// paths, the manager as a string, path-less replace, group member adds and
// filtered removes.
func TestSCIM_EntraCycle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env, c := newEnv(t, db)
		mgr := modeltest.AddUser(t, env.Store.Users, env.Org.ID, identity.User{FirstName: "Mia", LastName: "Manager", Email: "mia@contoso.com"})

		// Entra first looks the user up by its matching attribute.
		if r := c.do("GET", "/Users?filter="+q(`userName eq "alice@contoso.com"`), nil).want(t, 200); r.total() != 0 {
			t.Fatalf("found before create: %s", r.raw)
		}
		created := c.do("POST", "/Users", obj{
			"schemas":    []any{userSchema, enterpriseSchema},
			"externalId": "a1b2c3", "userName": "alice@contoso.com", "active": true, "displayName": "Alice Adams",
			"emails":         []any{obj{"primary": true, "type": "work", "value": "alice@contoso.com"}},
			"meta":           obj{"resourceType": "User"},
			"name":           obj{"formatted": "Alice Adams", "familyName": "Adams", "givenName": "Alice"},
			"title":          "Engineer",
			enterpriseSchema: obj{"employeeNumber": "E-1", "department": "R&D"},
		}).want(t, http.StatusCreated)
		id := created.id()
		if created.header.Get("ETag") == "" || created.header.Get("Location") == "" {
			t.Fatalf("no ETag or Location: %v", created.header)
		}
		if created.body["userName"] != "alice@contoso.com" || created.body["externalId"] != "a1b2c3" || created.body["active"] != true {
			t.Fatalf("created %s", created.raw)
		}
		if r := c.do("GET", "/Users?filter="+q(`externalId eq "a1b2c3"`), nil).want(t, 200); r.total() != 1 || r.resources()[0]["id"] != id {
			t.Fatalf("by externalId: %s", r.raw)
		}

		// The update Entra sends after an attribute change.
		c.do("PATCH", "/Users/"+id, patch(
			obj{"op": "Replace", "path": "displayName", "value": "Alice A. Adams"},
			obj{"op": "Add", "path": "title", "value": "Lead Engineer"},
			obj{"op": "Replace", "path": `emails[type eq "work"].value`, "value": "alice.adams@contoso.com"},
			obj{"op": "Add", "path": `phoneNumbers[type eq "mobile"].value`, "value": "+1 555 0100"},
			obj{"op": "Replace", "path": enterpriseSchema + ":manager", "value": models.FormatID(mgr.ID)},
			obj{"op": "Replace", "path": "name.givenName", "value": "Alicia"},
		)).want(t, 200)
		u := user(t, env, id)
		if u.DisplayName != "Alice A. Adams" || u.Title != "Lead Engineer" || u.Email != "alice.adams@contoso.com" ||
			u.MobileNumber != "+1 555 0100" || u.ManagerID == nil || *u.ManagerID != mgr.ID || u.FirstName != "Alicia" || u.UserName != "alice@contoso.com" {
			t.Fatalf("after PATCH: %+v", u)
		}
		// Path-less replace with nested objects and URN keys.
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "replace", "value": obj{
			"name":                           obj{"familyName": "Adams-Smith"},
			enterpriseSchema + ":department": "Research",
			"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": obj{"manager": obj{"value": models.FormatID(mgr.ID)}},
		}})).want(t, 200)
		if u = user(t, env, id); u.LastName != "Adams-Smith" || u.FirstName != "Alicia" || u.Department != "Research" {
			t.Fatalf("after path-less replace: %+v", u)
		}
		// Deactivate and reactivate with booleans as strings.
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "Replace", "path": "active", "value": "False"})).want(t, 200)
		if u = user(t, env, id); u.Status != identity.UserInactive {
			t.Fatalf("not deactivated: %+v", u)
		}
		r := c.do("PATCH", "/Users/"+id, patch(obj{"op": "Replace", "path": "active", "value": "True"})).want(t, 200)
		if r.body["active"] != true {
			t.Fatalf("not reactivated: %s", r.raw)
		}

		// Groups: create, add a member, remove it with a filter path, rename.
		g := c.do("POST", "/Groups", obj{"schemas": []any{groupSchema}, "displayName": "Engineering", "externalId": "grp-1", "members": []any{}}).want(t, 201)
		gid := g.id()
		if r := c.do("GET", "/Groups?filter="+q(`displayName eq "Engineering"`)+"&excludedAttributes=members", nil).want(t, 200); r.total() != 1 {
			t.Fatalf("group by name: %s", r.raw)
		} else if _, has := r.resources()[0]["members"]; has {
			t.Fatalf("members despite excludedAttributes: %s", r.raw)
		}
		c.do("PATCH", "/Groups/"+gid, patch(obj{"op": "Add", "path": "members", "value": []any{obj{"value": id}, obj{"value": models.FormatID(mgr.ID)}}})).want(t, 200)
		// Adding again adds no duplicate.
		c.do("PATCH", "/Groups/"+gid, patch(obj{"op": "Add", "path": "members", "value": []any{obj{"value": id}}})).want(t, 200)
		c.do("PATCH", "/Groups/"+gid, patch(obj{"op": "Remove", "path": `members[value eq "` + models.FormatID(mgr.ID) + `"]`})).want(t, 200)
		c.do("PATCH", "/Groups/"+gid, patch(obj{"op": "Replace", "path": "displayName", "value": "Engineering Team"})).want(t, 200)
		got := c.do("GET", "/Groups/"+gid, nil).want(t, 200)
		if got.body["displayName"] != "Engineering Team" || !slices.Equal(memberValues(got), []string{id}) {
			t.Fatalf("group: %s", got.raw)
		}
		if r := c.do("GET", "/Users/"+id+"?attributes=groups", nil).want(t, 200); len(r.body["groups"].([]any)) != 1 || r.body["userName"] != nil {
			t.Fatalf("user's groups: %s", r.raw)
		}

		// Every write is audited with the token as a client actor.
		evs := modeltest.WantEvents(t, db, env.Org.ID, audit.UserCreated, 2) // the manager's, then Alice's
		if ev := evs[1]; ev.Actor.Type != models.ActorClient || ev.Actor.DisplayName != "Provisioning" {
			t.Fatalf("actor %+v", evs[1].Actor)
		}
		modeltest.WantEvents(t, db, env.Org.ID, audit.GroupMembersRemoved, 1)

		c.do("DELETE", "/Groups/"+gid, nil).want(t, http.StatusNoContent)
		c.do("GET", "/Groups/"+gid, nil).wantError(t, 404, "")
		c.do("DELETE", "/Users/"+id, nil).want(t, http.StatusNoContent)
		c.do("GET", "/Users/"+id, nil).wantError(t, 404, "")
		modeltest.OneEvent(t, db, env.Org.ID, audit.UserDeleted)
	})
}

// TestSCIM_OktaCycle drives a provisioning cycle the way Okta sends it:
// lookups by userName with startIndex=1&count=100, PUT of the whole user,
// PATCH {active:false} to deactivate, group renames and member changes in
// one PATCH, paging to the end.
func TestSCIM_OktaCycle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env, c := newEnv(t, db)
		lookup := "/Users?filter=" + q(`userName eq "bob@okta.example"`) + "&startIndex=1&count=100"
		if r := c.do("GET", lookup, nil).want(t, 200); r.total() != 0 || r.body["startIndex"] != float64(1) {
			t.Fatalf("lookup: %s", r.raw)
		}
		body := obj{
			"schemas":  []any{userSchema},
			"userName": "bob@okta.example", "name": obj{"givenName": "Bob", "familyName": "Builder"},
			"emails":      []any{obj{"primary": true, "value": "bob@okta.example", "type": "work"}},
			"displayName": "Bob Builder", "locale": "en-US", "externalId": "00u1okta", "groups": []any{},
			"password": "a long enough password", "active": true,
		}
		id := c.do("POST", "/Users", body).want(t, 201).id()
		c.do("POST", "/Users", body).wantError(t, 409, "uniqueness")
		if r := c.do("GET", lookup, nil).want(t, 200); r.total() != 1 {
			t.Fatalf("lookup after create: %s", r.raw)
		}
		got := c.do("GET", "/Users/"+id, nil).want(t, 200)
		if got.body["preferredLanguage"] != "en-US" || got.body["password"] != nil {
			t.Fatalf("got %s", got.raw)
		}
		// Okta's PUT sends the whole user back with its changes.
		body["name"] = obj{"givenName": "Robert", "familyName": "Builder"}
		body["id"] = id
		delete(body, "password")
		if r := c.do("PUT", "/Users/"+id, body, "If-Match", got.header.Get("ETag")).want(t, 200); r.body["name"].(obj)["givenName"] != "Robert" {
			t.Fatalf("PUT: %s", r.raw)
		}
		// The old version is stale now.
		c.do("PUT", "/Users/"+id, body, "If-Match", got.header.Get("ETag")).wantError(t, http.StatusPreconditionFailed, "")
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "replace", "value": obj{"active": false}})).want(t, 200)
		if u := user(t, env, id); u.Status != identity.UserInactive || u.TokensValidAfter == nil {
			t.Fatalf("deactivate: %+v", u)
		}
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "replace", "value": obj{"active": true}})).want(t, 200)
		if u := user(t, env, id); u.Status != identity.UserActive {
			t.Fatalf("reactivate: %+v", u)
		}

		other := c.do("POST", "/Users", obj{"schemas": []any{userSchema}, "userName": "carol@okta.example",
			"name": obj{"givenName": "Carol"}, "emails": []any{obj{"value": "carol@okta.example", "primary": true}}, "active": true}).want(t, 201).id()
		gid := c.do("POST", "/Groups", obj{"schemas": []any{groupSchema}, "displayName": "Okta Group", "members": []any{}}).want(t, 201).id()
		// Okta renames and changes members in one PATCH.
		c.do("PATCH", "/Groups/"+gid, patch(
			obj{"op": "replace", "value": obj{"id": gid, "displayName": "Okta Group Renamed"}},
			obj{"op": "add", "path": "members", "value": []any{obj{"value": id, "display": "bob@okta.example"}, obj{"value": other}}},
			obj{"op": "remove", "path": "members", "value": []any{obj{"value": other}}},
		)).want(t, 200)
		g := c.do("GET", "/Groups/"+gid, nil).want(t, 200)
		if g.body["displayName"] != "Okta Group Renamed" || !slices.Equal(memberValues(g), []string{id}) {
			t.Fatalf("group: %s", g.raw)
		}
		if r := c.do("GET", "/Groups?filter="+q(`members[value eq "`+id+`"]`), nil).want(t, 200); r.total() != 1 {
			t.Fatalf("groups of a member: %s", r.raw)
		}

		// Paging to the end, count=1.
		var seen []string
		for start := 1; ; start++ {
			r := c.do("GET", "/Users?startIndex="+itoa(start)+"&count=1&sortBy=userName", nil).want(t, 200)
			if len(r.resources()) == 0 {
				break
			}
			seen = append(seen, r.resources()[0]["userName"].(string))
			if r.total() != 2 || r.body["itemsPerPage"] != float64(1) {
				t.Fatalf("page: %s", r.raw)
			}
		}
		if !slices.Equal(seen, []string{"bob@okta.example", "carol@okta.example"}) {
			t.Fatalf("paged %v", seen)
		}
		if r := c.do("GET", "/Users?count=0", nil).want(t, 200); r.total() != 2 || len(r.resources()) != 0 {
			t.Fatalf("count=0: %s", r.raw)
		}
		c.do("DELETE", "/Groups/"+gid, nil).want(t, 204)
		c.do("DELETE", "/Users/"+id, nil).want(t, 204)
	})
}
