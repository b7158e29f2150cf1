package scim

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models/identity"
	mscim "iam/models/scim"
)

// TestAppendJSON: the answers' encoder writes what encoding/json writes,
// byte for byte, for the documents the surface builds (nested maps and
// slices, nil ones, numbers, times through json.Marshal) and for strings
// that need escaping.
func TestAppendJSON(t *testing.T) {
	var nilDoc doc
	var nilList []any
	for _, v := range []any{
		nil, "", true, false, 0, -7, int64(math.MinInt64), 1.5, math.MaxFloat64, json.Number("12"),
		doc{"b": 1, "a": []any{doc{"value": "x", "primary": true}, "y", nil}, "Z": doc{}, "n": nilDoc, "l": nilList},
		[]doc{{"id": "1"}, nil}, []string{"a", "<b>"}, []string(nil), []doc(nil),
		doc{"meta": doc{"created": time.Date(2026, 12, 7, 7, 0, 0, 5, time.UTC), "version": `W/"abc"`}},
		map[string]string{"k": "v"}, struct{ A int }{A: 1},
	} {
		want, wantErr := json.Marshal(v)
		got, err := appendJSON(nil, v)
		if string(got) != string(want) || (err == nil) != (wantErr == nil) {
			t.Errorf("%#v: got %s (%v), want %s (%v)", v, got, err, want, wantErr)
		}
	}
	if _, err := appendJSON(nil, doc{"x": math.NaN()}); err == nil {
		t.Error("NaN encoded without an error")
	}
}

// TestAppendUserJSON_MatchesUserDoc: the list's user writer writes the
// bytes of the User document encoded, for users with every combination of
// empty and set attributes (so that each optional attribute and each
// first member of an object is both present and absent), strings that need
// escaping, with and without groups, and the list around them.
func TestAppendUserJSON_MatchesUserDoc(t *testing.T) {
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodGet, "https://idp.example/scim/v2/Users", nil)
	base := resourceBase(c)
	texts := []string{"", "x", `<"é\u2028>` + "\x00\xff"}
	rng := rand.New(rand.NewPCG(7, 25)) //nolint:gosec // G404: reproducible test users, not a secret
	var users []identity.User
	for i := range 2000 {
		pick := func() string { return texts[rng.IntN(len(texts))] }
		u := identity.User{ID: int64(i + 1), OrgID: 1, FirstName: pick(), LastName: pick(), DisplayName: pick(),
			Email: pick(), EmployeeID: pick(), Title: pick(), Department: pick(), Company: pick(), City: pick(),
			StateProvince: pick(), Street: pick(), ZipPostal: pick(), Country: pick(), MobileNumber: pick(),
			HomePhone: pick(), TelephoneNumber: pick(), Fax: pick(), Language: pick(), UserName: pick(),
			ExternalID: pick(), Status: rng.IntN(3),
			CreatedAt: time.Unix(rng.Int64N(1<<32), rng.Int64N(1e9)), UpdatedAt: time.Unix(rng.Int64N(1<<32), 0)}
		if rng.IntN(2) == 0 {
			m := rng.Int64N(1 << 40)
			u.ManagerID = &m
		}
		users = append(users, u)
	}
	groups := map[int64][]mscim.GroupRef{}
	for i := range users {
		switch i % 3 {
		case 1:
			groups[users[i].ID] = []mscim.GroupRef{{ID: 9, Name: "<all>"}}
		case 2:
			groups[users[i].ID] = []mscim.GroupRef{{ID: 9, Name: "a"}, {ID: 1 << 40, Name: ""}}
		}
	}
	for i := range users {
		for _, g := range [][]mscim.GroupRef{nil, {}, groups[users[i].ID]} {
			want, err := appendJSON(nil, userDoc(c, &users[i], g))
			if err != nil {
				t.Fatal(err)
			}
			if got := appendUserJSON(nil, base, &users[i], g); string(got) != string(want) {
				t.Fatalf("user %+v, groups %v:\n got %s\nwant %s", users[i], g, got, want)
			}
		}
	}
	for _, g := range []map[int64][]mscim.GroupRef{nil, groups} {
		resources := make([]any, 0, 100)
		for i := range users[:100] {
			var ug []mscim.GroupRef
			if g != nil {
				if ug = g[users[i].ID]; ug == nil {
					ug = []mscim.GroupRef{}
				}
			}
			resources = append(resources, userDoc(c, &users[i], ug))
		}
		want, err := appendJSON(nil, listResponse(1_000_000, 201, resources))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendUserListJSON(nil, base, 1_000_000, 201, users[:100], g); string(got) != string(want) {
			t.Fatalf("list:\n got %s\nwant %s", got, want)
		}
	}
	if got := appendUserListJSON(nil, base, 0, 0, nil, nil); !json.Valid(got) || string(got) != mustJSON(t, listResponse(0, 0, []any{})) {
		t.Errorf("empty list: %s", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := appendJSON(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
