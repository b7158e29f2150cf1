package scim_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/modeltest"
)

// TestSCIM_Tokens: a provisioning token works on /scim/v2 only, is refused
// at once when revoked; an OAuth token needs a svc.scim scope (403 in
// SCIM's shape without, recorded as access.denied); another
// organization's token sees 404 for this organization's ids.
func TestSCIM_Tokens(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env, c := newEnv(t, db)
		id := c.do("POST", "/Users", obj{"userName": "dora@example.com"}).want(t, 201).id()

		// No token, a wrong one, a provisioning token on /api/v1.
		(&scimClient{t: t, env: env}).do("GET", "/Users", nil).wantError(t, 401, "")
		(&scimClient{t: t, env: env, token: "iamscim_nope"}).do("GET", "/Users", nil).wantError(t, 401, "") //nolint:gosec // G101: a made-up token the test expects refused
		if r := env.Do(apitest.Request{Method: "GET", Path: "/api/v1/users", Token: c.token}); r.Status != 401 {
			t.Fatalf("a provisioning token on /api/v1: %d", r.Status)
		}
		// OAuth access tokens: svc.scim scopes only.
		plain := &scimClient{t: t, env: env, token: env.Token(env.Org, "svc.user.ALL")}
		plain.do("GET", "/Users", nil).wantError(t, 403, "")
		modeltest.OneEvent(t, db, env.Org.ID, audit.AccessDenied)
		reader := &scimClient{t: t, env: env, token: env.Token(env.Org, "svc.scim.READ")}
		reader.do("GET", "/Users/"+id, nil).want(t, 200)
		reader.do("DELETE", "/Users/"+id, nil).wantError(t, 403, "")
		(&scimClient{t: t, env: env, token: env.Token(env.Org, "svc.scim.ALL")}).do("PATCH", "/Users/"+id,
			patch(obj{"op": "replace", "path": "title", "value": "Chief"})).want(t, 200)

		// Another organization's provisioning token.
		other := env.NewOrg("Other")
		_, secret, err := env.Store.ProvisioningTokens.Create(context.Background(), other.ID, "Other", nil)
		if err != nil {
			t.Fatal(err)
		}
		o := &scimClient{t: t, env: env, token: secret}
		o.do("GET", "/Users/"+id, nil).wantError(t, 404, "")
		o.do("PATCH", "/Users/"+id, patch(obj{"op": "replace", "path": "title", "value": "x"})).wantError(t, 404, "")
		o.do("DELETE", "/Users/"+id, nil).wantError(t, 404, "")
		if r := o.do("GET", "/Users?filter="+q(`userName eq "dora@example.com"`), nil).want(t, 200); r.total() != 0 {
			t.Fatalf("another organization lists the user: %s", r.raw)
		}

		// Revoked: refused at the next request.
		list, err := env.Store.ProvisioningTokens.List(context.Background(), env.Org.ID)
		if err != nil || len(list) != 1 || list[0].LastUsedAt == nil {
			t.Fatalf("tokens %+v %v", list, err)
		}
		if err := env.Store.ProvisioningTokens.Revoke(context.Background(), env.Org.ID, list[0].ID); err != nil {
			t.Fatal(err)
		}
		c.do("GET", "/Users/"+id, nil).wantError(t, 401, "")
	})
}

// TestSCIM_Errors: the scimType of each refusal, size limits and the
// media type.
func TestSCIM_Errors(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env, c := newEnv(t, db)
		id := c.do("POST", "/Users", obj{"userName": "erin@example.com", "externalId": "e"}).want(t, 201).id()
		c.do("POST", "/Users", obj{"userName": "ERIN@example.com", "emails": []any{obj{"value": "other@example.com"}}}).wantError(t, 409, "uniqueness")
		c.do("POST", "/Users", obj{"displayName": "no userName"}).wantError(t, 400, "invalidValue")
		c.do("POST", "/Users", "{not json").wantError(t, 400, "invalidSyntax")
		c.do("GET", "/Users?filter="+q(`userName eq`), nil).wantError(t, 400, "invalidFilter")
		c.do("GET", "/Users?filter="+q(`nosuch eq "x"`), nil).wantError(t, 400, "invalidFilter")
		c.do("POST", "/Users/.search", obj{"schemas": []any{"urn:ietf:params:scim:api:messages:2.0:SearchRequest"},
			"filter": `externalId eq "e"`, "attributes": []any{"userName"}, "startIndex": 1, "count": 10}).want(t, 200)
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "move", "path": "title"})).wantError(t, 400, "invalidSyntax")
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "replace", "path": "bad path[", "value": "x"})).wantError(t, 400, "invalidPath")
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "replace", "path": "id", "value": "1"})).wantError(t, 400, "mutability")
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "remove"})).wantError(t, 400, "noTarget")
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "replace", "path": "active", "value": "maybe"})).wantError(t, 400, "invalidValue")
		c.do("GET", "/Users/12345", nil).wantError(t, 404, "")
		c.do("GET", "/Users/not-an-id", nil).wantError(t, 404, "")
		c.do("DELETE", "/Users/"+id, nil, "If-Match", `W/"stale"`).wantError(t, 412, "")

		ops := make([]any, 1001)
		for i := range ops {
			ops[i] = obj{"op": "add", "path": "title", "value": "x"}
		}
		c.do("PATCH", "/Users/"+id, obj{"schemas": []any{patchSchema}, "Operations": ops}).wantError(t, 400, "tooMany")
		c.do("POST", "/Users", strings.Repeat(" ", 5<<20)).want(t, http.StatusRequestEntityTooLarge)

		// A body in another media type.
		req, _ := http.NewRequest("POST", env.URL+"/scim/v2/Users", strings.NewReader(`{"userName":"x@example.com"}`))
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Content-Type", "text/plain")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Fatalf("text/plain: %d", resp.StatusCode)
		}

		// A dynamic group's members are read-only.
		dyn := &identity.Group{OrgID: env.Org.ID, Name: "Sales", IsDynamic: true, MembershipRule: `department eq "Sales"`}
		job := &jobs.Job{Kind: "GroupRecompute", Module: "Identity", ActionName: "Recompute group members"}
		if err := env.Store.Groups.Create(context.Background(), dyn, nil, job); err != nil {
			t.Fatal(err)
		}
		c.do("GET", "/Groups/"+models.FormatID(dyn.ID), nil).want(t, 200)
		c.do("PATCH", "/Groups/"+models.FormatID(dyn.ID), patch(obj{"op": "add", "path": "members", "value": []any{obj{"value": id}}})).wantError(t, 400, "mutability")
		c.do("POST", "/Groups", obj{"displayName": "G", "members": []any{obj{"value": "999"}}}).wantError(t, 400, "invalidValue")
	})
}

// TestSCIM_Discovery: the discovery endpoints tell what is supported.
func TestSCIM_Discovery(t *testing.T) {
	_, c := newEnv(t, dbtest.SQLite(t))
	spc := c.do("GET", "/ServiceProviderConfig", nil).want(t, 200)
	if spc.body["patch"].(obj)["supported"] != true || spc.body["bulk"].(obj)["supported"] != false ||
		spc.body["filter"].(obj)["maxResults"] != float64(1000) || spc.body["etag"].(obj)["supported"] != true {
		t.Fatalf("config %s", spc.raw)
	}
	if r := c.do("GET", "/ResourceTypes", nil).want(t, 200); r.total() != 2 {
		t.Fatalf("resource types %s", r.raw)
	}
	c.do("GET", "/ResourceTypes/User", nil).want(t, 200)
	c.do("GET", "/ResourceTypes/Nope", nil).wantError(t, 404, "")
	if r := c.do("GET", "/Schemas", nil).want(t, 200); r.total() != 3 {
		t.Fatalf("schemas %s", r.raw)
	}
	if r := c.do("GET", "/Schemas/"+enterpriseSchema, nil).want(t, 200); r.body["name"] != "EnterpriseUser" {
		t.Fatalf("enterprise schema %s", r.raw)
	}
}

// TestProvisioningTokens_API: an admin creates a token through /api/v1
// (its value shown once), the token works on /scim/v2, its use is listed,
// and a revoke refuses its next request.
func TestProvisioningTokens_API(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		admin := env.Token(env.Org, "svc.provisioning_token.ALL")
		r := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/provisioning-tokens", Token: admin,
			Body: map[string]any{"name": "Entra ID", "expires_in_days": 365}})
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		var created struct {
			Data struct {
				ID        string     `json:"id"`
				Token     string     `json:"token"`
				ExpiresAt *time.Time `json:"expires_at"`
				Scopes    []string   `json:"scopes"`
			} `json:"data"`
		}
		r.JSON(t, &created)
		if created.Data.ExpiresAt == nil || created.Data.ExpiresAt.Before(time.Now().AddDate(0, 0, 364)) {
			t.Fatalf("expires_at %v", created.Data.ExpiresAt)
		}
		if created.Data.Token == "" || len(created.Data.Scopes) != 1 || created.Data.Scopes[0] != "svc.scim.ALL" {
			t.Fatalf("created %s", r.Body)
		}
		c := &scimClient{t: t, env: env, token: created.Data.Token}
		c.do("GET", "/Users", nil).want(t, 200)
		list := env.Get("/api/v1/provisioning-tokens", admin)
		if list.Status != 200 || strings.Contains(string(list.Body), created.Data.Token) || !strings.Contains(string(list.Body), `"last_used_at":"`) {
			t.Fatalf("list: %d %s", list.Status, list.Body)
		}
		// A token without the scope cannot manage tokens; a SCIM token cannot either.
		if r := env.Get("/api/v1/provisioning-tokens", env.Token(env.Org, "svc.scim.ALL")); r.Status != 403 {
			t.Fatalf("svc.scim.ALL lists tokens: %d", r.Status)
		}
		other := env.NewOrg("Other")
		if r := env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/provisioning-tokens/" + created.Data.ID,
			Token: env.Token(other, "svc.provisioning_token.ALL")}); r.Status != 404 {
			t.Fatalf("another organization revokes: %d", r.Status)
		}
		if r := env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/provisioning-tokens/" + created.Data.ID, Token: admin}); r.Status != 204 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		c.do("GET", "/Users", nil).wantError(t, 401, "")
		modeltest.OneEvent(t, db, env.Org.ID, audit.ProvisioningTokenCreated)
		modeltest.OneEvent(t, db, env.Org.ID, audit.ProvisioningTokenRevoked)
	})
}

// TestSCIM_SeesRESTUsers: a user created through /api/v1 has a userName
// (its email) that SCIM finds, and a SCIM deactivation shows in /api/v1.
func TestSCIM_SeesRESTUsers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env, c := newEnv(t, db)
		tok := env.Token(env.Org, "svc.user.ALL")
		r := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/users", Token: tok,
			Body: map[string]any{"firstName": "Rest", "email": "Rest.User@example.com"}})
		if r.Status != 201 {
			t.Fatalf("REST create: %d %s", r.Status, r.Body)
		}
		found := c.do("GET", "/Users?filter="+q(`userName eq "rest.user@example.com"`), nil).want(t, 200)
		if found.total() != 1 || found.resources()[0]["userName"] != "Rest.User@example.com" {
			t.Fatalf("SCIM lookup of a REST user: %s", found.raw)
		}
		id := found.resources()[0]["id"].(string)
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "Replace", "path": "active", "value": "False"})).want(t, 200)
		if r := env.Get("/api/v1/users/"+id, tok); r.Status != 200 || !strings.Contains(string(r.Body), `"status":0`) {
			t.Fatalf("REST view after SCIM deactivation: %d %s", r.Status, r.Body)
		}
	})
}

// TestSCIM_DynamicGroupsFollowUsers: a SCIM create and update re-evaluate
// the user against the dynamic groups, as a REST write does.
func TestSCIM_DynamicGroupsFollowUsers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env, c := newEnv(t, db)
		dyn := &identity.Group{OrgID: env.Org.ID, Name: "Sales", IsDynamic: true, MembershipRule: `department eq "Sales"`}
		job := &jobs.Job{Kind: "GroupRecompute", Module: "Identity", ActionName: "Recompute group members"}
		if err := env.Store.Groups.Create(context.Background(), dyn, nil, job); err != nil {
			t.Fatal(err)
		}
		gid := models.FormatID(dyn.ID)
		id := c.do("POST", "/Users", obj{"userName": "sam@example.com",
			enterpriseSchema: obj{"department": "Sales"}}).want(t, 201).id()
		if got := memberValues(c.do("GET", "/Groups/"+gid, nil).want(t, 200)); len(got) != 1 || got[0] != id {
			t.Fatalf("members after create: %v", got)
		}
		c.do("PATCH", "/Users/"+id, patch(obj{"op": "Replace", "path": enterpriseSchema + ":department", "value": "R&D"})).want(t, 200)
		if got := memberValues(c.do("GET", "/Groups/"+gid, nil).want(t, 200)); len(got) != 0 {
			t.Fatalf("members after the department changed: %v", got)
		}
	})
}

// TestSCIM_ConditionalDelete: DELETE with If-Match deletes a user or a
// group only at its current version (checked on the row the delete locks):
// a stale version is 412 and leaves it, the current one deletes it, and a
// missing resource is 404 either way.
func TestSCIM_ConditionalDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		_, c := newEnv(t, db)
		for _, r := range []struct {
			path string
			body obj
		}{
			{"/Users", obj{"userName": "cora@example.com"}},
			{"/Groups", obj{"displayName": "Conditional"}},
		} {
			id := c.do("POST", r.path, r.body).want(t, 201).id()
			etag := c.do("GET", r.path+"/"+id, nil).want(t, 200).header.Get("ETag")
			if etag == "" {
				t.Fatalf("GET %s/%s: no ETag", r.path, id)
			}
			c.do("DELETE", r.path+"/"+id, nil, "If-Match", `W/"stale"`).wantError(t, 412, "")
			c.do("GET", r.path+"/"+id, nil).want(t, 200)
			c.do("DELETE", r.path+"/"+id, nil, "If-Match", etag).want(t, 204)
			c.do("GET", r.path+"/"+id, nil).wantError(t, 404, "")
			c.do("DELETE", r.path+"/"+id, nil, "If-Match", etag).wantError(t, 404, "")
		}
	})
}
