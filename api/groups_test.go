package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/jobs"
)

type groupBody struct {
	ID              string   `json:"id"`
	Name            string   `json:"name"`
	MembersCount    int      `json:"members_count"`
	IsDynamic       bool     `json:"is_dynamic"`
	MembershipRule  string   `json:"membership_rule"`
	MembershipJobID *string  `json:"membership_job_id"`
	Members         []string `json:"members"`
}

func groupReq(t *testing.T, env *apitest.Env, method, path, tok string, body any, want int) groupBody {
	t.Helper()
	resp := env.Do(apitest.Request{Method: method, Path: path, Token: tok, Body: body})
	if resp.Status != want {
		t.Fatalf("%s %s: %d %s", method, path, resp.Status, resp.Body)
	}
	var out struct{ Data groupBody }
	if len(resp.Body) > 0 {
		resp.JSON(t, &out)
	}
	return out.Data
}

func TestGroups_Static(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		utok := env.Token(env.Org, "svc.user.ALL")
		tok := env.Token(env.Org, "svc.group.ALL")
		a := createUser(t, env, utok, map[string]any{"firstName": "A", "email": "a@example.com"})
		b := createUser(t, env, utok, map[string]any{"firstName": "B", "email": "b@example.com"})
		otherOrg := env.NewOrg("Other")
		x := createUser(t, env, env.Token(otherOrg, "svc.user.ALL"), map[string]any{"firstName": "X", "email": "x@example.com"})

		g := groupReq(t, env, "POST", "/api/v1/groups", tok, map[string]any{"name": "Staff", "description": "d", "members": []string{a.ID}}, 201)
		if g.MembersCount != 1 || g.IsDynamic || g.Members != nil || g.MembershipJobID != nil {
			t.Errorf("created %+v", g)
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups", Token: tok, Body: map[string]any{"name": "STAFF"}}), 409, "00000105", "name")
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups", Token: tok, Body: map[string]any{"description": "no name"}}), 400, "00000109", "name")
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups", Token: tok, Body: map[string]any{"name": "X", "members": []string{a.ID, x.ID}}}), 400, "00000109", "members")
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups", Token: tok, Body: map[string]any{"name": "X", "members": []string{"me"}}}), 400, "00000109", "members")

		got := groupReq(t, env, "POST", "/api/v1/groups/"+g.ID+"/members", tok, map[string]any{"members": []string{a.ID, b.ID}}, 200)
		if got.MembersCount != 2 {
			t.Errorf("after adding: %+v", got)
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups/" + g.ID + "/members", Token: tok, Body: map[string]any{"members": []string{x.ID}}}), 400, "00000109", "members")
		full := groupReq(t, env, "GET", "/api/v1/groups/"+g.ID, tok, nil, 200)
		if want := []string{a.ID, b.ID}; !slices.Equal(full.Members, want) || full.Name != "Staff" {
			t.Errorf("GET group members %v, want %v", full.Members, want)
		}
		resp := env.Get("/api/v1/groups/"+g.ID+"?fields=name", tok)
		if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"data":{"id":"`+g.ID+`","name":"Staff"}`) {
			t.Errorf("GET with fields: %d %s", resp.Status, resp.Body)
		}
		var members userList
		env.Get("/api/v1/groups/"+g.ID+"/members?fields=email&limit=1", tok).JSON(t, &members)
		if members.Meta.Total != 2 || len(members.Data) != 1 || members.Data[0]["email"] != "a@example.com" {
			t.Errorf("members list %+v", members)
		}
		got = groupReq(t, env, "DELETE", "/api/v1/groups/"+g.ID+"/members?ids="+a.ID+",12345", tok, nil, 200)
		if got.MembersCount != 1 {
			t.Errorf("after removing: %+v", got)
		}
		// Deleting a member user keeps the count right.
		env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/users/" + b.ID, Token: utok})
		if got := groupReq(t, env, "GET", "/api/v1/groups/"+g.ID, tok, nil, 200); got.MembersCount != 0 || len(got.Members) != 0 {
			t.Errorf("after deleting the member user: %+v", got)
		}
		upd := groupReq(t, env, "PATCH", "/api/v1/groups/"+g.ID, tok, map[string]any{"name": "Team"}, 200)
		if upd.Name != "Team" {
			t.Errorf("PATCH: %+v", upd)
		}
		wantError(t, env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/groups/" + g.ID, Token: tok, Body: map[string]any{"membership_rule": `city eq "x"`}}), 400, "00000109", "membership_rule")
		wantError(t, env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/groups/" + g.ID, Token: tok, Body: map[string]any{"is_dynamic": true}}), 400, "00000109", "is_dynamic")

		// Lists, scopes, tenancy.
		g2 := groupReq(t, env, "POST", "/api/v1/groups", tok, map[string]any{"name": "Alpha"}, 201)
		var list struct {
			Data []map[string]any `json:"data"`
			Meta struct {
				Total      int     `json:"total_no_of_objects"`
				NextCursor *string `json:"next_cursor"`
			} `json:"meta"`
		}
		env.Get("/api/v1/groups?sort=name&limit=1&fields=name", tok).JSON(t, &list)
		if list.Meta.Total != 2 || list.Data[0]["name"] != "Alpha" || list.Meta.NextCursor == nil {
			t.Errorf("list %+v", list)
		}
		env.Get("/api/v1/groups?sort=name&limit=1&fields=name&cursor="+url.QueryEscape(*list.Meta.NextCursor), tok).JSON(t, &list)
		if list.Data[0]["name"] != "Team" {
			t.Errorf("second page %+v", list)
		}
		wantError(t, env.Get("/api/v1/groups?filter="+url.QueryEscape(`members eq 1`), tok), 400, "00000107", "filter")
		wantError(t, env.Get("/api/v1/groups", utok), 403, "00000102", "")
		otherTok := env.Token(otherOrg, "svc.group.ALL")
		wantError(t, env.Get("/api/v1/groups/"+g.ID, otherTok), 404, "00000103", "")
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups/" + g.ID + "/members", Token: otherTok, Body: map[string]any{"members": []string{x.ID}}}), 404, "00000103", "")

		resp = env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/groups?ids=" + g2.ID + ",1", Token: tok})
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `"status":204`) || !strings.Contains(string(resp.Body), `"title":"Group Not Found"`) {
			t.Errorf("bulk delete: %d %s", resp.Status, resp.Body)
		}
		groupReq(t, env, "DELETE", "/api/v1/groups/"+g.ID, tok, nil, 204)
		wantError(t, env.Get("/api/v1/groups/"+g.ID, tok), 404, "00000103", "")
	})
}

func TestGroups_Dynamic(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		utok := env.Token(env.Org, "svc.user.ALL")
		tok := env.Token(env.Org, "svc.group.ALL", "svc.job.READ")
		var german []string
		for i := range 30 {
			country := "FR"
			if i%3 == 0 {
				country = "DE"
			}
			u := createUser(t, env, utok, map[string]any{"firstName": fmt.Sprint("U", i), "email": fmt.Sprintf("u%d@example.com", i), "department": "Sales", "country": country})
			if country == "DE" {
				german = append(german, u.ID)
			}
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups", Token: tok, Body: map[string]any{"name": "D", "is_dynamic": true, "membership_rule": "password eq 1"}}), 400, "00000109", "membership_rule")
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups", Token: tok, Body: map[string]any{"name": "D", "is_dynamic": true}}), 400, "00000109", "membership_rule")

		g := groupReq(t, env, "POST", "/api/v1/groups", tok, map[string]any{"name": "German sales", "is_dynamic": true,
			"membership_rule": `department eq "Sales" and country eq "DE"`}, 201)
		if g.MembershipJobID == nil {
			t.Fatalf("no membership job: %+v", g)
		}
		job := env.WaitJob(env.Org, mustID(t, *g.MembershipJobID), time.Minute, finished)
		if job.Status != jobs.JobCompleted || job.Module != "Identity" || job.Processed != 30 {
			t.Errorf("recompute job %+v", job)
		}
		got := groupReq(t, env, "GET", "/api/v1/groups/"+g.ID, tok, nil, 200)
		if got.MembersCount != len(german) || !slices.Equal(got.Members, german) {
			t.Errorf("members %v (%d), want %v", got.Members, got.MembersCount, german)
		}
		var jobs jobList
		env.Get("/api/v1/jobs?filter="+url.QueryEscape(`module eq "Identity"`), tok).JSON(t, &jobs)
		if jobs.Meta.Total != 1 {
			t.Errorf("/jobs shows %d Identity jobs, want 1", jobs.Meta.Total)
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/groups/" + g.ID + "/members", Token: tok, Body: map[string]any{"members": []string{german[0]}}}), 400, "00000109", "members")
		wantError(t, env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/groups/" + g.ID + "/members?ids=" + german[0], Token: tok}), 400, "00000109", "members")

		// User writes move membership at once.
		n := createUser(t, env, utok, map[string]any{"firstName": "N", "email": "n@example.com", "department": "Sales", "country": "DE"})
		env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/users/" + german[0], Token: utok, Body: map[string]any{"country": "AT"}})
		env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/users/" + german[1], Token: utok})
		got = groupReq(t, env, "GET", "/api/v1/groups/"+g.ID, tok, nil, 200)
		want := append(slices.Clone(german[2:]), n.ID)
		if !slices.Equal(got.Members, want) || got.MembersCount != len(want) {
			t.Errorf("after user writes: members %v (%d), want %v", got.Members, got.MembersCount, want)
		}

		// A rule change recomputes in a new job.
		upd := groupReq(t, env, "PATCH", "/api/v1/groups/"+g.ID, tok, map[string]any{"membership_rule": `country eq "FR"`}, 200)
		if upd.MembershipJobID == nil || *upd.MembershipJobID == *g.MembershipJobID {
			t.Fatalf("no new job: %+v", upd)
		}
		env.WaitJob(env.Org, mustID(t, *upd.MembershipJobID), time.Minute, finished)
		got = groupReq(t, env, "GET", "/api/v1/groups/"+g.ID, tok, nil, 200)
		if got.MembersCount != 20 || got.MembershipRule != `country eq "FR"` {
			t.Errorf("after the rule change: %d members, rule %q", got.MembersCount, got.MembershipRule)
		}
	})
}

// TestGroups_MembersWithoutUserReadShowIDNameEmailOnly: a token with only
// svc.group.READ sees each member as id, displayName and email, and may
// filter and sort on those alone; svc.user.READ (or ALL) beside it sees
// whole user records. Another organization's group is not found either way.
func TestGroups_MembersWithoutUserReadShowIDNameEmailOnly(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	utok := env.Token(env.Org, "svc.user.ALL")
	a := createUser(t, env, utok, map[string]any{"firstName": "A", "displayName": "Ann", "email": "a@example.com", "department": "Secret", "mobileNumber": "+491701234567"})
	b := createUser(t, env, utok, map[string]any{"firstName": "B", "displayName": "Bob", "email": "b@example.com", "department": "Open"})
	g := groupReq(t, env, "POST", "/api/v1/groups", env.Token(env.Org, "svc.group.ALL"), map[string]any{"name": "Staff", "members": []string{a.ID, b.ID}}, 201)
	path := "/api/v1/groups/" + g.ID + "/members"

	narrow := env.Token(env.Org, "svc.group.READ")
	var page userList
	resp := env.Get(path, narrow)
	if resp.Status != http.StatusOK {
		t.Fatalf("GET members with svc.group.READ: %d %s", resp.Status, resp.Body)
	}
	resp.JSON(t, &page)
	if len(page.Data) != 2 {
		t.Fatalf("members %+v", page.Data)
	}
	for _, m := range page.Data {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"displayName", "email", "id"}) {
			t.Errorf("a member shown to svc.group.READ has %v, want id, displayName, email only", keys)
		}
	}
	if page.Data[0]["displayName"] != "Ann" || page.Data[0]["email"] != "a@example.com" {
		t.Errorf("first member %v", page.Data[0])
	}
	for _, q := range []string{"filter=" + url.QueryEscape(`department eq "Secret"`), "fields=mobileNumber", "sort=department", "filter=" + url.QueryEscape(`mobileNumber pr`)} {
		wantError(t, env.Get(path+"?"+q, narrow), 400, "00000107", "")
	}
	env.Get(path+"?filter="+url.QueryEscape(`email eq "b@example.com"`)+"&sort=-displayName", narrow).JSON(t, &page)
	if len(page.Data) != 1 || page.Data[0]["id"] != b.ID {
		t.Errorf("filter on email: %+v", page.Data)
	}

	for _, scopes := range [][]string{{"svc.group.READ", "svc.user.READ"}, {"svc.group.ALL", "svc.user.ALL"}} {
		env.Get(path+"?filter="+url.QueryEscape(`department eq "Secret"`), env.Token(env.Org, scopes...)).JSON(t, &page)
		if len(page.Data) != 1 || page.Data[0]["department"] != "Secret" || page.Data[0]["mobileNumber"] != "+491701234567" {
			t.Errorf("%v: whole records expected, got %+v", scopes, page.Data)
		}
	}
	other := env.NewOrg("Other")
	for _, tok := range []string{env.Token(other, "svc.group.READ"), env.Token(other, "svc.group.READ", "svc.user.READ")} {
		wantError(t, env.Get(path, tok), 404, "00000103", "")
	}
}
