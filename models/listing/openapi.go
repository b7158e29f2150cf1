package listing

import (
	"regexp"
	"strings"
)

// The OpenAPI document gives each list's filter, sort and fields a pattern
// made by the functions below from the list's Schema, so that a request
// the document calls valid is never refused (api TestOpenAPI_ListPatterns
// keeps the two in step). A pattern is a regular expression both Go
// (RE2) and ECMA 262 read. It says a part of what Parse accepts, never
// more: names as declared (Parse also takes them in any case), one sort key
// (Parse takes several, each attribute once, which no regular expression
// says), and filters of comparisons joined by "and" or "or" without
// parentheses or not, strings without escapes, times in whole seconds UTC.

// SortPattern is the pattern of sort: one sortable attribute, ascending or,
// with a leading "-", descending.
func (s *Schema) SortPattern() string {
	return `^-?` + quoteNames(s.attrNames(func(a *Attribute) bool { return a.Sort })) + `$`
}

// FieldsPattern is the pattern of fields: comma-separated top-level
// attribute names.
func (s *Schema) FieldsPattern() string {
	names := quoteNames(s.attrNames(func(a *Attribute) bool { return !strings.Contains(a.Name, ".") }))
	return `^` + names + `(,` + names + `)*$`
}

// FilterPattern is the pattern of filter: comparisons of filterable
// attributes with literals of their types, or presence tests, joined by
// "and" or "or".
func (s *Schema) FilterPattern() string {
	term := s.filterTerm()
	return `^` + term + `( (and|or) ` + term + `)*$`
}

// The literals of FilterPattern, by attribute type.
const (
	stringLiteral  = `"[^"\\\x00-\x1f]*"`
	integerLiteral = `-?(0|[1-9][0-9]{0,17})`
	idLiteral      = `("[1-9][0-9]{0,17}"|[1-9][0-9]{0,17})`
	timeLiteral    = `"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z"`
	booleanLiteral = `(true|false)`
)

// filterTerm is one comparison or presence test, as an alternation.
func (s *Schema) filterTerm() string {
	var terms []string
	add := func(names []string, rest string) {
		if len(names) > 0 {
			terms = append(terms, quoteNames(names)+` `+rest)
		}
	}
	ofType := func(t Type) []string {
		return s.attrNames(func(a *Attribute) bool { return a.Filter && a.Type == t })
	}
	add(ofType(TypeString), `(eq|ne|co|sw|ew|gt|ge|lt|le) `+stringLiteral)
	add(ofType(TypeInteger), `(eq|ne|gt|ge|lt|le) `+integerLiteral)
	add(ofType(TypeID), `(eq|ne|gt|ge|lt|le) `+idLiteral)
	add(ofType(TypeTime), `(eq|ne|gt|ge|lt|le) `+timeLiteral)
	add(ofType(TypeBoolean), `(eq|ne) `+booleanLiteral)
	add(s.attrNames(func(a *Attribute) bool { return a.Filter }), `(pr|eq null|ne null)`)
	return `(` + strings.Join(terms, `|`) + `)`
}

// attrNames lists the names of the attributes keep says, in declaration order.
func (s *Schema) attrNames(keep func(*Attribute) bool) []string {
	var names []string
	for i := range s.Attributes {
		if keep(&s.Attributes[i]) {
			names = append(names, s.Attributes[i].Name)
		}
	}
	return names
}

// quoteNames is the alternation (a|b|c) of names, regular-expression
// characters quoted.
func quoteNames(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return `(` + strings.Join(quoted, `|`) + `)`
}
