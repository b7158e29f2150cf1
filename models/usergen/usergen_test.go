package usergen_test

import (
	"os"
	"strings"
	"testing"

	"iam/models/usergen"
)

// userSource is models/users.go with extra put after the Language field.
func userSource(t *testing.T, extra string) []byte {
	t.Helper()
	src, err := os.ReadFile("../identity/users.go")
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "\tLanguage "
	i := strings.Index(string(src), anchor)
	if i < 0 {
		t.Fatal("models/identity/users.go has no Language field")
	}
	return []byte(string(src[:i]) + extra + "\n" + string(src[i:]))
}

// TestGenerate_NewAttribute adds one tagged field to User and checks that
// it reaches every generated place: list column, scanner, allow-list,
// length check, view, JSON writer and request fields.
func TestGenerate_NewAttribute(t *testing.T) {
	fields, err := usergen.Parse(userSource(t, "\tCostCenter string `bun:\"cost_center\" api:\"costCenter,write,filter,sort,max=MaxUserFieldLen\"`"), "User")
	if err != nil {
		t.Fatal(err)
	}
	models, err := usergen.Models(fields, usergen.Source)
	if err != nil {
		t.Fatal(err)
	}
	api, err := usergen.API(fields, usergen.Source)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"gender", "cost_center", "language"`,
		`&u.Gender, &u.CostCenter, &u.Language`,
		`{Name: "costCenter", Column: "cost_center", Type: listing.TypeString, Filter: true, Sort: true},`,
		`{"costCenter", u.CostCenter, MaxUserFieldLen},`,
		`func userTexts(u *User) [21]userText`,
	} {
		if !strings.Contains(collapse(models), want) {
			t.Errorf("models part lacks %s", want)
		}
	}
	for _, want := range []string{
		"CostCenter string `json:\"costCenter\"`",
		"CostCenter: u.CostCenter,",
		"b = appendJSONString(append(b, `,\"costCenter\":`...), u.CostCenter)",
		"CostCenter *string `json:\"costCenter\"`",
		"if f.CostCenter != nil { u.CostCenter = *f.CostCenter }",
	} {
		if !strings.Contains(collapse(api), want) {
			t.Errorf("api part lacks %s", want)
		}
	}
}

// collapse turns every run of white space into one space.
func collapse(b []byte) string { return strings.Join(strings.Fields(string(b)), " ") }

// TestParse_Refuses checks that a field the generator cannot follow is
// refused with its name rather than generating wrong code.
func TestParse_Refuses(t *testing.T) {
	for _, c := range []struct{ field, want string }{
		{"\tContainer string `bun:\"container\"`", "Container: no api tag"},
		{"\tContainer string `bun:\"container\" api:\"container,wirte\"`", `unknown api tag option "wirte"`},
		{"\tContainer string `bun:\"container\" api:\"-,write\"`", "need an API name"},
		{"\tContainer string `bun:\"container\" api:\"container,nolist\"`", "must be read by lists"},
		{"\tContainer bool `bun:\"container\" api:\"container,max=MaxUserFieldLen\"`", "max is for string fields"},
		{"\tContainer []string `bun:\"container\" api:\"container\"`", "cannot show a []string"},
		{"\tContainer float64 `bun:\"container\" api:\"-\"`", "list scanner cannot read a float64"},
		{"\tContainer string `bun:\"container\" api:\"con-tainer\"`", "not letters and digits"},
		{"\tContainer string `api:\"container\"`", "no bun tag"},
	} {
		_, err := usergen.Parse(userSource(t, c.field), "User")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.field, err, c.want)
		}
	}
}
