package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
)

type userBody struct {
	ID            string         `json:"id"`
	FirstName     string         `json:"firstName"`
	DisplayName   string         `json:"displayName"`
	Email         string         `json:"email"`
	EmployeeID    string         `json:"employeeID"`
	Manager       *string        `json:"manager"`
	Country       string         `json:"country"`
	Language      string         `json:"language"`
	Department    string         `json:"department"`
	Status        int            `json:"status"`
	IsLicensed    bool           `json:"isLicensed"`
	PrimarySource map[string]any `json:"primarySource"`
}

type userList struct {
	Data []map[string]any `json:"data"`
	Meta struct {
		Cursor     *string `json:"cursor"`
		NextCursor *string `json:"next_cursor"`
		IsLast     bool    `json:"is_last"`
		Limit      int     `json:"limit"`
		Total      int     `json:"total_no_of_objects"`
	} `json:"meta"`
}

// createUser posts a user and returns it, failing the test unless 201.
func createUser(t *testing.T, env *apitest.Env, tok string, body map[string]any) userBody {
	t.Helper()
	resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/users", Token: tok, Body: body})
	if resp.Status != http.StatusCreated {
		t.Fatalf("POST /users %v: %d %s", body, resp.Status, resp.Body)
	}
	var out struct{ Data userBody }
	resp.JSON(t, &out)
	return out.Data
}

func wantError(t *testing.T, resp *apitest.Response, status int, code, inDetail string) {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("status %d, want %d: %s", resp.Status, status, resp.Body)
	}
	e := resp.ErrorBody(t)
	if e.Code != code || !strings.Contains(e.Detail, inDetail) {
		t.Errorf("error %+v, want code %s with %q in detail", e, code, inDetail)
	}
}

func TestUsers_CRUD(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.user.ALL")
		boss := createUser(t, env, tok, map[string]any{"firstName": "Ada", "lastName": "Boss", "email": "ada@example.com", "employeeID": "E1"})
		u := createUser(t, env, tok, map[string]any{
			"firstName": "Bob", "lastName": "Smith", "email": "bob@example.com", "password": "a long password",
			"country": "de", "language": "en-us", "gender": "M", "manager": boss.ID, "department": "Sales",
		})
		if u.DisplayName != "Bob Smith" || u.Country != "DE" || u.Language != "en-US" || u.Status != 1 || !u.IsLicensed ||
			u.Manager == nil || *u.Manager != boss.ID || u.PrimarySource["applicationName"] != "IAM" {
			t.Errorf("created user = %+v", u)
		}
		// container is shown, written and filtered on.
		placed := createUser(t, env, tok, map[string]any{"firstName": "Cy", "email": "cy@example.com", "container": "OU=Sales,DC=example,DC=com"})
		var list userList
		env.Get("/api/v1/users?filter="+url.QueryEscape(`container eq "OU=Sales,DC=example,DC=com"`), tok).JSON(t, &list)
		if len(list.Data) != 1 || list.Data[0]["id"] != placed.ID || list.Data[0]["container"] != "OU=Sales,DC=example,DC=com" {
			t.Errorf("filter on container = %v", list.Data)
		}
		stored, err := env.Store.Users.Get(t.Context(), env.Org.ID, mustID(t, u.ID))
		if err != nil || !strings.HasPrefix(stored.PasswordHash, "$argon2id$") {
			t.Errorf("stored password hash %q, %v", stored.PasswordHash, err)
		}

		resp := env.Get("/api/v1/users/"+u.ID, tok)
		if resp.Status != http.StatusOK || strings.Contains(string(resp.Body), "password") {
			t.Errorf("GET user: %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/users/" + u.ID, Token: tok,
			Body: map[string]any{"title": "Lead", "manager": nil, "status": 0}})
		var patched struct{ Data userBody }
		resp.JSON(t, &patched)
		if resp.Status != http.StatusOK || patched.Data.Manager != nil || patched.Data.Status != 0 || patched.Data.FirstName != "Bob" {
			t.Errorf("PATCH: %d %s", resp.Status, resp.Body)
		}

		// Another organization's id answers 404 on every route.
		other := env.Token(env.NewOrg("Other"), "svc.user.ALL")
		for _, method := range []string{"GET", "PATCH", "DELETE"} {
			resp := env.Do(apitest.Request{Method: method, Path: "/api/v1/users/" + u.ID, Token: other, Body: map[string]any{"title": "x"}})
			wantError(t, resp, http.StatusNotFound, "00000103", "")
		}
		wantError(t, env.Get("/api/v1/users/abc", tok), http.StatusNotFound, "00000103", "")

		// Scopes: READ reads, and only reads.
		read := env.Token(env.Org, "svc.user.READ")
		if resp := env.Get("/api/v1/users/"+u.ID, read); resp.Status != http.StatusOK {
			t.Errorf("GET with READ: %d", resp.Status)
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/users", Token: read, Body: map[string]any{"firstName": "x", "email": "x@example.com"}}),
			http.StatusForbidden, "00000102", "")
		create := env.Token(env.Org, "svc.user.CREATE")
		wantError(t, env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/users/" + u.ID, Token: create}), http.StatusForbidden, "00000102", "")

		if resp := env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/users/" + u.ID, Token: tok}); resp.Status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", resp.Status, resp.Body)
		}
		wantError(t, env.Get("/api/v1/users/"+u.ID, tok), http.StatusNotFound, "00000103", "")
	})
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := models.ParseID("id", s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestUsers_BadInputNamesTheField(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.user.WRITE", "svc.user.READ")
		a := createUser(t, env, tok, map[string]any{"firstName": "A", "email": "a@example.com", "employeeID": "E1"})
		b := createUser(t, env, tok, map[string]any{"firstName": "B", "email": "b@example.com", "manager": a.ID})
		valid := func(extra map[string]any) map[string]any {
			body := map[string]any{"firstName": "C", "email": "c@example.com"}
			for k, v := range extra {
				body[k] = v
			}
			return body
		}
		for _, c := range []struct {
			name   string
			body   any
			status int
			code   string
			field  string
		}{
			{"missing firstName", map[string]any{"email": "c@example.com"}, 400, "00000109", "firstName"},
			{"missing email", map[string]any{"firstName": "C"}, 400, "00000109", "email"},
			{"bad email", valid(map[string]any{"email": "c@"}), 400, "00000109", "email"},
			{"gender", valid(map[string]any{"gender": "Q"}), 400, "00000109", "gender"},
			{"country", valid(map[string]any{"country": "Germany"}), 400, "00000109", "country"},
			{"language", valid(map[string]any{"language": "xx-DE"}), 400, "00000109", "language"},
			{"status", valid(map[string]any{"status": 7}), 400, "00000109", "status"},
			{"container", valid(map[string]any{"container": "OU=Sales, DC=example"}), 400, "00000109", "container"},
			{"container too long", valid(map[string]any{"container": "OU=" + strings.Repeat("a", 1100)}), 400, "00000109", "container"},
			{"status type", valid(map[string]any{"status": "on"}), 400, "00000109", "status"},
			{"unknown field", valid(map[string]any{"isDomainVerified": true}), 400, "00000109", "isDomainVerified"},
			{"short password", valid(map[string]any{"password": "short"}), 400, "00000109", "password"},
			{"unknown manager", valid(map[string]any{"manager": "123"}), 400, "00000109", "manager"},
			{"manager not an id", valid(map[string]any{"manager": "boss"}), 400, "00000109", "manager"},
			{"duplicate employee id", valid(map[string]any{"employeeID": "E1"}), 409, "00000105", "employeeID"},
			{"duplicate email", valid(map[string]any{"email": "A@example.com"}), 409, "00000105", "email"},
			{"not JSON", "{", 400, "00000108", ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				req := apitest.Request{Method: "POST", Path: "/api/v1/users", Token: tok, Body: c.body}
				if s, ok := c.body.(string); ok {
					req.Body, req.Header = []byte(s), http.Header{"Content-Type": {"application/json"}}
				}
				wantError(t, env.Do(req), c.status, c.code, c.field)
			})
		}
		// A manager change that closes a cycle, and one to the user itself.
		for _, m := range []string{b.ID, a.ID} {
			resp := env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/users/" + a.ID, Token: tok, Body: map[string]any{"manager": m, "title": "T"}})
			wantError(t, resp, http.StatusBadRequest, "00000109", "manager")
		}
		// Nothing was half-written.
		var list userList
		env.Get("/api/v1/users", tok).JSON(t, &list)
		if list.Meta.Total != 2 {
			t.Errorf("%d users after refused writes, want 2", list.Meta.Total)
		}
		if got, _ := env.Store.Users.Get(t.Context(), env.Org.ID, mustID(t, a.ID)); got.Title != "" || got.ManagerID != nil {
			t.Errorf("a refused PATCH changed the user: %+v", got)
		}
	})
}

func TestUsers_ListAndBulkDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.user.ALL")
		var ids []string
		for i := range 12 {
			dept := "IT"
			if i%3 == 0 {
				dept = "Sales"
			}
			u := createUser(t, env, tok, map[string]any{"firstName": fmt.Sprintf("U%02d", i), "email": fmt.Sprintf("u%d@example.com", i),
				"department": dept, "isLicensed": i%2 == 0})
			ids = append(ids, u.ID)
		}
		otherTok := env.Token(env.NewOrg("Other"), "svc.user.ALL")
		foreign := createUser(t, env, otherTok, map[string]any{"firstName": "F", "email": "f@example.com"})

		// Pages of 5 in id order with fields.
		var seen []string
		path := "/api/v1/users?limit=5&fields=email,department"
		for page := 0; ; page++ {
			var list userList
			env.Get(path, tok).JSON(t, &list)
			if list.Meta.Total != 12 || list.Meta.Limit != 5 {
				t.Fatalf("meta %+v", list.Meta)
			}
			for _, item := range list.Data {
				if len(item) != 3 {
					t.Errorf("fields: item %v", item)
				}
				seen = append(seen, item["id"].(string))
			}
			if list.Meta.IsLast {
				break
			}
			path = "/api/v1/users?limit=5&fields=email,department&cursor=" + url.QueryEscape(*list.Meta.NextCursor)
		}
		if strings.Join(seen, ",") != strings.Join(ids, ",") {
			t.Errorf("paged ids %v, want %v", seen, ids)
		}
		for _, c := range []struct {
			query string
			total int
		}{
			{"licensing=licensed", 6}, {"licensing=unlicensed", 6}, {"licensing=both", 12},
			{"filter=" + url.QueryEscape(`department eq "Sales"`), 4},
			{"licensing=licensed&filter=" + url.QueryEscape(`department eq "Sales" and firstName sw "u0"`), 2},
			{"sort=-firstName&limit=1", 12},
		} {
			var list userList
			env.Get("/api/v1/users?"+c.query, tok).JSON(t, &list)
			if list.Meta.Total != c.total {
				t.Errorf("%s: total %d, want %d", c.query, list.Meta.Total, c.total)
			}
		}
		var sorted userList
		env.Get("/api/v1/users?sort=-firstName&limit=1", tok).JSON(t, &sorted)
		if sorted.Data[0]["firstName"] != "U11" {
			t.Errorf("sort=-firstName first = %v", sorted.Data[0])
		}
		for _, q := range []string{"licensing=some", "filter=" + url.QueryEscape(`shoe eq 1`), "sort=password", "fields=password", "limit=0", "cursor=abc"} {
			wantError(t, env.Get("/api/v1/users?"+q, tok), http.StatusBadRequest, "00000107", strings.SplitN(q, "=", 2)[0])
		}

		// Bulk delete: mine go, missing and foreign ones are 404.
		resp := env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/users?ids=" + ids[0] + "," + ids[1] + ",999," + foreign.ID + ",x", Token: tok})
		var results []struct {
			ResourceID string          `json:"resource_id"`
			Status     int             `json:"status"`
			Error      *map[string]any `json:"error"`
		}
		resp.JSON(t, &results)
		want := []int{204, 204, 404, 404, 404}
		if resp.Status != http.StatusOK || len(results) != len(want) {
			t.Fatalf("bulk delete: %d %s", resp.Status, resp.Body)
		}
		for i, r := range results {
			if r.Status != want[i] || (r.Status == 404) != (r.Error != nil) {
				t.Errorf("item %d = %+v, want status %d", i, r, want[i])
			}
		}
		if resp := env.Get("/api/v1/users/"+foreign.ID, otherTok); resp.Status != http.StatusOK {
			t.Error("a bulk delete removed another organization's user")
		}
		wantError(t, env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/users", Token: tok}), http.StatusBadRequest, "00000107", "ids")
	})
}
