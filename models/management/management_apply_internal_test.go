package management

import (
	"iam/models/identity"
	"testing"
)

// A move re-evaluates dynamic memberships only when a rule names the
// container; a rule that does not parse counts as naming it.
func TestRulesName(t *testing.T) {
	for rule, want := range map[string]bool{
		`container eq "OU=A"`:   true,
		`CONTAINER sw "OU="`:    true,
		`department eq "Sales"`: false,
		`not (container pr)`:    true,
		`department eq "a" or (title eq "b" and container pr)`: true,
		`department eq "a" and (title eq "b" or status eq 1)`:  false,
		`this is not a rule`: true,
	} {
		if got := rulesName([]identity.DynamicGroup{{ID: 1, Rule: `title eq "x"`}, {ID: 2, Rule: rule}}, "container"); got != want {
			t.Errorf("rulesName(%q) = %v, want %v", rule, got, want)
		}
	}
	if rulesName(nil, "container") {
		t.Error("no dynamic group names the container")
	}
}
