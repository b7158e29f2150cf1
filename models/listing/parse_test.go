package listing

import (
	"errors"
	"strings"
	"testing"
)

func TestParseFilter_Valid(t *testing.T) {
	tests := []struct{ in, want string }{
		// Every operator, case-insensitively.
		{`userName eq "bjensen"`, `userName eq "bjensen"`},
		{`userName EQ "bjensen"`, `userName eq "bjensen"`},
		{`a ne "x"`, `a ne "x"`},
		{`a co "x"`, `a co "x"`},
		{`a sw "x"`, `a sw "x"`},
		{`a Ew "x"`, `a ew "x"`},
		{`a gt 1`, `a gt 1`},
		{`a ge 1`, `a ge 1`},
		{`a lt 1`, `a lt 1`},
		{`a le 1`, `a le 1`},
		{`title pr`, `title pr`},
		{`title PR`, `title pr`},
		// Sub-attributes and RFC name characters.
		{`name.familyName co "O'Malley"`, `name.familyName co "O'Malley"`},
		{`meta.lastModified gt "2011-05-13T04:42:34Z"`, `meta.lastModified gt "2011-05-13T04:42:34Z"`},
		{`$ref pr`, `$ref pr`},
		{`employee-number_2 eq 5`, `employee-number_2 eq 5`},
		// Literals.
		{`a eq true`, `a eq true`},
		{`a eq FALSE`, `a eq false`},
		{`a eq Null`, `a eq null`},
		{`a eq -12.5e+3`, `a eq -12.5e+3`},
		{`a eq 0`, `a eq 0`},
		{`a eq -0.0E1`, `a eq -0.0E1`},
		{`a eq ""`, `a eq ""`},
		// Precedence: not > and > or; and/or are left to right and flat.
		{`a pr or b pr and c pr`, `(a pr or (b pr and c pr))`},
		{`a pr and b pr or c pr`, `((a pr and b pr) or c pr)`},
		{`a pr and b pr and c pr`, `(a pr and b pr and c pr)`},
		{`a pr or b pr or c pr and d pr`, `(a pr or b pr or (c pr and d pr))`},
		{`not (a pr) and b pr`, `(not (a pr) and b pr)`},
		{`not (a pr or b pr) or c pr`, `(not (a pr or b pr) or c pr)`},
		{`(a pr or b pr) and c pr`, `((a pr or b pr) and c pr)`},
		{`a pr and (b pr or c pr)`, `(a pr and (b pr or c pr))`},
		{`((a pr))`, `a pr`},
		{`NOT(a pr)`, `not (a pr)`},
		{`not (not (a pr))`, `not (not (a pr))`},
		{`a pr AND b pr OR c pr`, `((a pr and b pr) or c pr)`},
		// Whitespace is free around tokens, and optional next to quotes and parentheses.
		{"  a\teq\n\"x\"\r\n", `a eq "x"`},
		{`(a eq"x")and(b pr)`, `(a eq "x" and b pr)`},
		// The RFC's examples.
		{`userType eq "Employee" and (emails co "example.com" or emails.value co "example.org")`,
			`(userType eq "Employee" and (emails co "example.com" or emails.value co "example.org"))`},
		{`userType ne "Employee" and not (emails co "example.com" or emails.value co "example.org")`,
			`(userType ne "Employee" and not (emails co "example.com" or emails.value co "example.org"))`},
	}
	for _, tt := range tests {
		e, err := ParseFilter(tt.in)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tt.in, err)
			continue
		}
		if got := e.String(); got != tt.want {
			t.Errorf("ParseFilter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestParseFilter_Escapes(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`"q\"b\\s\/"`, `q"b\s/`},
		{`"\b\f\n\r\t"`, "\b\f\n\r\t"},
		{`"\u00e9\u00C9"`, "éÉ"},
		{`"\ud83d\ude00"`, "😀"},
		{`"é😀 raw"`, "é😀 raw"},
		{`"100%_\\"`, `100%_\`},
	}
	for _, tt := range tests {
		e, err := ParseFilter("a eq " + tt.in)
		if err != nil {
			t.Errorf("ParseFilter(%s): %v", tt.in, err)
			continue
		}
		v := e.(*Compare).Value
		if v.Kind != StringValue || v.Text != tt.want {
			t.Errorf("ParseFilter(%s) value = %v %q, want %q", tt.in, v.Kind, v.Text, tt.want)
		}
		// The canonical form reads back to the same string.
		again, err := ParseFilter(e.String())
		if err != nil || again.(*Compare).Value.Text != tt.want {
			t.Errorf("round trip of %s: %v, %v", e, again, err)
		}
	}
}

func TestParseFilter_Positions(t *testing.T) {
	e, err := ParseFilter(`é eq 1`)
	if err == nil {
		t.Fatalf("a non-ASCII attribute name parsed: %v", e)
	}
	e, err = ParseFilter(`name eq "é" and  b.c gt 2`)
	if err != nil {
		t.Fatal(err)
	}
	and := e.(*And)
	first, second := and.Terms[0].(*Compare), and.Terms[1].(*Compare)
	if first.Attr.Pos != 1 || first.Value.Pos != 9 {
		t.Errorf("first term positions = %d, %d; want 1, 9", first.Attr.Pos, first.Value.Pos)
	}
	// Characters, not bytes: "é" is one character.
	if second.Attr.Pos != 18 || second.Value.Pos != 25 || second.Attr.Name != "b" || second.Attr.Sub != "c" {
		t.Errorf("second term = %+v, want b.c at 18, value at 25", second)
	}
}

func TestParseFilter_Invalid(t *testing.T) {
	tests := []struct {
		in   string
		pos  int
		want string
	}{
		{``, 0, "empty"},
		{`   `, 0, "empty"},
		{`a`, 2, `expected an operator`},
		{`a eq`, 5, `expected a value`},
		{`a foo 1`, 3, `expected an operator (eq, ne, co, sw, ew, gt, ge, lt, le or pr) after "a", found "foo"`},
		{`a eq 1 b pr`, 8, `expected "and", "or" or the end`},
		{`a eq 1 and`, 11, `expected an attribute name`},
		{`and a pr`, 1, `expected an attribute name, "(" or "not", found "and"`},
		{`a pr or or b pr`, 9, `expected an attribute name`},
		{`(a pr`, 6, `expected ")" to close the "(" at character 1`},
		{`a pr)`, 5, `")" has no matching "("`},
		{`()`, 2, `expected an attribute name`},
		{`not a pr`, 5, `expected "(" after "not"`},
		{`not`, 4, `expected "(" after "not"`},
		{`"x" eq a`, 1, `expected an attribute name`},
		{`a eq b`, 6, `expected a value`},
		{`a eq yes`, 6, `expected a value`},
		{`emails[type eq "work"]`, 7, `value path filters`},
		{`emails[type eq "work"].value pr`, 7, `value path filters`},
		{`urn:ietf:params:scim:schemas:core:2.0:User:userName eq "x"`, 1, `schema URI prefixes are not supported`},
		{`a.b.c pr`, 1, `more than one sub-attribute`},
		{`a..b pr`, 1, `invalid attribute path`},
		{`a. pr`, 1, `invalid attribute path`},
		{`a.1 pr`, 1, `invalid attribute path`},
		{`a eq 01`, 6, `invalid number "01"`},
		{`a eq 1.`, 6, `invalid number`},
		{`a eq .5`, 6, `unexpected character '.'`},
		{`a eq 1e`, 6, `invalid number`},
		{`a eq -`, 6, `invalid number`},
		{`a eq 1x`, 6, `invalid number "1x"`},
		{`a eq +1`, 6, `unexpected character '+'`},
		{`a eq 'x'`, 6, `unexpected character '\''`},
		{`a eq "x`, 6, `no closing quote`},
		{`a eq "x\`, 8, `no closing quote`},
		{`a eq "\x"`, 7, `invalid escape \x`},
		{`a eq "\u12"`, 7, `four hexadecimal digits`},
		{`a eq "\u12G4"`, 7, `four hexadecimal digits`},
		{`a eq "\ud800"`, 7, `lone UTF-16 surrogate`},
		{`a eq "\udc00\ud800"`, 7, `lone UTF-16 surrogate`},
		{`a eq "\ud800\u0041"`, 7, `lone UTF-16 surrogate`},
		{`a eq "\u0000"`, 7, `NUL`},
		{"a eq \"tab\there\"", 10, `control character`},
		{"a eq \"\x00\"", 7, `control character`},
		{`a eq "é" b`, 10, `expected "and", "or"`},
		{`a eq 1 & b pr`, 8, `unexpected character '&'`},
		{"a eq \xff", 0, `not valid UTF-8`},
		{`a ] b`, 3, `expected an operator`},
	}
	for _, tt := range tests {
		e, err := ParseFilter(tt.in)
		var fe *FilterError
		if !errors.As(err, &fe) {
			t.Errorf("ParseFilter(%q) = %v, %v; want a *FilterError", tt.in, e, err)
			continue
		}
		if fe.Pos != tt.pos || !strings.Contains(fe.Msg, tt.want) {
			t.Errorf("ParseFilter(%q) error = %d %q; want %d and %q", tt.in, fe.Pos, fe.Msg, tt.pos, tt.want)
		}
	}
}

func TestParseFilter_Limits(t *testing.T) {
	long := strings.Repeat(`a pr and `, MaxFilterLength/9) + "a pr"
	if _, err := ParseFilter(long); err == nil || !strings.Contains(err.Error(), "longer than 4096 bytes") {
		t.Errorf("a %d-byte filter: %v; want too long", len(long), err)
	}
	fits := strings.Repeat(`a pr and `, (MaxFilterLength-4)/9) + "a pr"
	if _, err := ParseFilter(fits); err != nil {
		t.Errorf("a %d-byte filter: %v", len(fits), err)
	}

	nested := func(n int, open string) string {
		return strings.Repeat(open, n) + "a pr" + strings.Repeat(")", n)
	}
	for _, open := range []string{"(", "not (", "not("} {
		if _, err := ParseFilter(nested(MaxFilterDepth, open)); err != nil {
			t.Errorf("%d levels of %q: %v", MaxFilterDepth, open, err)
		}
		_, err := ParseFilter(nested(MaxFilterDepth+1, open))
		var fe *FilterError
		if !errors.As(err, &fe) || !strings.Contains(fe.Msg, "deeper than 32") {
			t.Errorf("%d levels of %q: %v; want too deep", MaxFilterDepth+1, open, err)
		}
	}
	// Depth is checked before the stack grows: thousands of parentheses
	// fail fast.
	if _, err := ParseFilter(strings.Repeat("(", MaxFilterLength)); err == nil {
		t.Error("4096 open parentheses parsed")
	}
}

func TestFilterError_Error(t *testing.T) {
	if got := (&FilterError{Pos: 3, Msg: "bad"}).Error(); got != "at character 3: bad" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&FilterError{Msg: "bad"}).Error(); got != "bad" {
		t.Errorf("Error() = %q", got)
	}
}
