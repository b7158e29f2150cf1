package listing

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/uptrace/bun/dialect"
)

// FuzzParseFilter checks, for any input, that the parser neither panics
// nor runs away, that its errors are *FilterError with a position inside
// the input, that the canonical form of a parsed filter parses back to
// itself (within the limits), and that the SQL of a parsed filter has one argument per
// placeholder on both dialects.
//
//	go test ./models/listing -run '^$' -fuzz FuzzParseFilter -fuzztime 60s
func FuzzParseFilter(f *testing.F) {
	for _, seed := range []string{
		`userName eq "bjensen"`,
		`name.familyName co "O'Malley"`,
		`title pr`,
		`meta.lastModified gt "2011-05-13T04:42:34Z"`,
		`userType eq "Employee" and (emails co "example.com" or emails.value co "example.org")`,
		`userType ne "Employee" and not (emails co "example.com" or emails.value co "example.org")`,
		`emails[type eq "work" and value co "@example.com"]`,
		`name eq "a" or rank gt 1 and not (active eq true)`,
		`not (not (note eq null))`,
		`createdAt ge "2024-05-01T10:00:00.5+02:00" and createdAt lt "2024-06-01T00:00:00Z"`,
		`id eq "12345" or id eq 12345`,
		`score ne null and score le -3`,
		`owner.name sw "\u00c9" or name ew "100%_\\"`,
		`name eq "\ud83d\ude00 \"q\" \/ \b\f\n\r\t"`,
		`rank eq 1.5e+10`,
		`a eq -0.0E-1`,
		`(((a pr)))`,
		`a pr)`,
		`(a pr`,
		`a eq "\ud800"`,
		`a eq "\u0000"`,
		`urn:ietf:params:scim:schemas:core:2.0:User:userName eq "x"`,
		`a..b pr`,
		`$ref pr`,
		"a eq \"\x01\"",
		"a eq \xff",
		`not a pr`,
		`a eq 01`,
		strings.Repeat("(", 40) + "a pr" + strings.Repeat(")", 40),
		strings.Repeat("not (", 20) + "a pr" + strings.Repeat(")", 20),
		strings.Repeat(`a pr and `, 50) + "a pr",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := ParseFilter(src)
		if err != nil {
			var fe *FilterError
			if !errors.As(err, &fe) {
				t.Fatalf("ParseFilter(%q) error %T %v is not a *FilterError", src, err, err)
			}
			if fe.Pos < 0 || fe.Pos > utf8.RuneCountInString(src)+1 {
				t.Fatalf("ParseFilter(%q) error at %d, outside the input", src, fe.Pos)
			}
			return
		}
		if len(src) > MaxFilterLength {
			t.Fatalf("ParseFilter accepted %d bytes", len(src))
		}
		canonical := e.String()
		again, err := ParseFilter(canonical)
		// The canonical form parenthesizes every group, so it may outgrow
		// the length and depth limits; nothing else may fail.
		if err != nil && !strings.Contains(err.Error(), "longer than") && !strings.Contains(err.Error(), "deeper than") {
			t.Fatalf("canonical form %q of %q does not parse: %v", canonical, src, err)
		}
		if err == nil && again.String() != canonical {
			t.Fatalf("canonical form %q of %q parses to %q", canonical, src, again.String())
		}
		pgSQL, pgArgs, pgErr := itemSchema.Where(dialect.PG, e)
		liteSQL, liteArgs, liteErr := itemSchema.Where(dialect.SQLite, e)
		if (pgErr == nil) != (liteErr == nil) {
			t.Fatalf("Where(%q): PostgreSQL %v, SQLite %v", src, pgErr, liteErr)
		}
		if pgErr != nil {
			var fe *FilterError
			if !errors.As(pgErr, &fe) {
				t.Fatalf("Where(%q) error %T %v is not a *FilterError", src, pgErr, pgErr)
			}
			return
		}
		if strings.Count(pgSQL, "?") != len(pgArgs) || strings.Count(liteSQL, "?") != len(liteArgs) {
			t.Fatalf("Where(%q): placeholders and arguments differ:\n%s %v\n%s %v", src, pgSQL, pgArgs, liteSQL, liteArgs)
		}
	})
}
