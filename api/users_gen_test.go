package api

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"iam/models/usergen"
)

// TestUserCodeGenerated fails when users_gen.go is not what cmd/usergen
// writes from models.User's tags now: a field added or changed without go
// generate.
func TestUserCodeGenerated(t *testing.T) {
	if err := usergen.Check("api", "../models/users.go", "users_gen.go"); err != nil {
		t.Fatal(err)
	}
}

// TestUserSchemas_FollowUser checks that the OpenAPI document describes
// the user as the generated code shows and takes it: User's properties
// (all required) are the view's members, UserProfile's the writable
// fields. A field added to models.User fails here until the document
// has it.
func TestUserSchemas_FollowUser(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	jsonNames := func(v any) []string {
		var names []string
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			if name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); name != "" {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names
	}
	schemaNames := func(name string) []string {
		schema := doc.Components.Schemas[name]
		if schema == nil || schema.Value == nil {
			t.Fatalf("no schema %s", name)
		}
		return slices.Sorted(maps.Keys(schema.Value.Properties))
	}
	view, fields := jsonNames(userView{}), jsonNames(userFields{})
	if got := schemaNames("User"); !slices.Equal(got, view) {
		t.Errorf("schema User has\n %v\nthe API shows\n %v", got, view)
	}
	required := slices.Sorted(slices.Values(doc.Components.Schemas["User"].Value.Required))
	if !slices.Equal(required, view) {
		t.Errorf("schema User requires\n %v\nthe API always shows\n %v", required, view)
	}
	if got := schemaNames("UserProfile"); !slices.Equal(got, fields) {
		t.Errorf("schema UserProfile has\n %v\nrequests take\n %v", got, fields)
	}
}
