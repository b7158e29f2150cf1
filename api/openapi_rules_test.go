package api

import (
	"strings"
	"testing"

	"iam/models"
)

// The user schemas' country and language patterns list the codes the
// service accepts (models.CountryCodes, models.LanguageCodes).
func TestOpenAPI_UserCodePatterns(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	countries := strings.Join(models.CountryCodes(), "|")
	want := map[string]string{
		"country":  "^(" + countries + ")?$",
		"language": "^((" + strings.Join(models.LanguageCodes(), "|") + ")(-(" + countries + "))?)?$",
	}
	for _, schema := range []string{"UserCreate", "UserPatch"} {
		props := doc.Components.Schemas[schema].Value.Properties
		for field, pattern := range want {
			if got := props[field].Value.Pattern; got != pattern {
				t.Errorf("%s.%s pattern %q, want %q", schema, field, got, pattern)
			}
		}
	}
}

// A dynamic group's membership_rule is a filter of GET /users: the group
// bodies give it the same pattern (empty for a static group on create).
func TestOpenAPI_MembershipRulePattern(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"GroupCreate": "^$|" + models.UserListing.FilterPattern(), "GroupPatch": models.UserListing.FilterPattern()}
	for schema, pattern := range want {
		if got := doc.Components.Schemas[schema].Value.Properties["membership_rule"].Value.Pattern; got != pattern {
			t.Errorf("%s.membership_rule pattern\n got %q\nwant %q", schema, got, pattern)
		}
	}
}
