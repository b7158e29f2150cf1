package listing

import (
	"net/url"
	"regexp"
	"testing"
)

// What the patterns match, Parse accepts; what Parse refuses, they do not
// match.
func TestPatterns_SayWhatParseAccepts(t *testing.T) {
	filter := regexp.MustCompile(itemSchema.FilterPattern())
	sort := regexp.MustCompile(itemSchema.SortPattern())
	fields := regexp.MustCompile(itemSchema.FieldsPattern())
	for _, c := range []struct {
		re           *regexp.Regexp
		param, value string
		match        bool
	}{
		{filter, "filter", `name eq "a b"`, true},
		{filter, "filter", `name co "é!?" and rank gt -5 or active eq false`, true},
		{filter, "filter", `id eq "123" or id ne 9 and createdAt ge "2024-02-28T23:59:59Z"`, true},
		{filter, "filter", `owner.name sw "x" and note pr or score eq null`, true},
		{filter, "filter", `name eq 5`, false},                // a number for a string
		{filter, "filter", `active gt true`, false},           // gt on a boolean
		{filter, "filter", `rank co 5`, false},                // co on an integer
		{filter, "filter", `secret eq "x"`, false},            // not filterable
		{filter, "filter", `createdAt gt "yesterday"`, false}, // not a time
		{filter, "filter", `name eq "a`, false},               // no closing quote
		{filter, "filter", `name eq "a\"b"`, false},           // escapes are left out
		{filter, "filter", `name eq "a" and`, false},
		{sort, "sort", `-createdAt`, true},
		{sort, "sort", `rank`, true},
		{sort, "sort", `note`, false}, // not sortable
		{sort, "sort", `name,name`, false},
		{fields, "fields", `name,secret,owner,name`, true},
		{fields, "fields", `owner.name`, false},
		{fields, "fields", `name,`, false},
	} {
		if got := c.re.MatchString(c.value); got != c.match {
			t.Errorf("%s=%s: pattern matches %t, want %t", c.param, c.value, got, c.match)
		}
		if !c.match {
			continue
		}
		if _, err := Parse(url.Values{c.param: {c.value}}, itemSchema); err != nil {
			t.Errorf("%s=%s matches the pattern but Parse refuses it: %v", c.param, c.value, err)
		}
	}
}
