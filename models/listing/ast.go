package listing

import (
	"strconv"
	"strings"
)

// Expr is a node of a parsed filter: *And, *Or, *Not, *Compare or *Present.
type Expr interface {
	// String writes the node back as filter text in canonical form: lower
	// case operators, JSON-quoted strings, every "and" and "or" group in
	// parentheses. Parsing the result gives an equal tree.
	String() string
	isExpr()
}

// And matches a row that every one of its two or more Terms matches.
type And struct{ Terms []Expr }

// Or matches a row that at least one of its two or more Terms matches.
type Or struct{ Terms []Expr }

// Not matches a row that Expr does not match. It is written not (expr).
type Not struct{ Expr Expr }

// Compare compares an attribute with a literal: userName eq "bjensen".
type Compare struct {
	Attr  AttrPath
	Op    Op
	Value Value
}

// Present is the pr operator: the attribute has a value (title pr).
type Present struct{ Attr AttrPath }

// AttrPath names an attribute, optionally with one sub-attribute
// (name.givenName). Names keep the case they were written in; a Schema
// matches them case-insensitively.
type AttrPath struct {
	Name string
	Sub  string // "" when there is no sub-attribute
	Pos  int    // 1-based character position in the filter text
}

// Op is a comparison operator, always lower case.
type Op string

// The comparison operators of RFC 7644 §3.4.2.2. The presence operator pr
// has its own node, Present.
const (
	Eq Op = "eq" // equal
	Ne Op = "ne" // not equal
	Co Op = "co" // contains
	Sw Op = "sw" // starts with
	Ew Op = "ew" // ends with
	Gt Op = "gt" // greater than
	Ge Op = "ge" // greater than or equal to
	Lt Op = "lt" // less than
	Le Op = "le" // less than or equal to
)

// ValueKind tells what kind of literal a Value is.
type ValueKind int

// The kinds of literal a filter may hold.
const (
	StringValue ValueKind = iota + 1 // a JSON string
	NumberValue                      // a JSON number
	BoolValue                        // true or false
	NullValue                        // null
)

// Value is a literal of a comparison.
type Value struct {
	Kind ValueKind
	// Text is the decoded string of a StringValue and the literal text of a
	// NumberValue (-12.5e3); it is empty for the other kinds.
	Text string
	Bool bool // the value of a BoolValue
	Pos  int  // 1-based character position in the filter text
}

func (*And) isExpr()     {}
func (*Or) isExpr()      {}
func (*Not) isExpr()     {}
func (*Compare) isExpr() {}
func (*Present) isExpr() {}

func (e *And) String() string { return joinTerms(e.Terms, " and ") }
func (e *Or) String() string  { return joinTerms(e.Terms, " or ") }
func (e *Not) String() string {
	inner := e.Expr.String()
	if !strings.HasPrefix(inner, "(") {
		inner = "(" + inner + ")"
	}
	return "not " + inner
}
func (e *Compare) String() string {
	return e.Attr.String() + " " + string(e.Op) + " " + e.Value.String()
}
func (e *Present) String() string { return e.Attr.String() + " pr" }

// String returns name or name.sub.
func (p AttrPath) String() string {
	if p.Sub == "" {
		return p.Name
	}
	return p.Name + "." + p.Sub
}

// String returns the literal as filter text.
func (v Value) String() string {
	switch v.Kind {
	case StringValue:
		return quote(v.Text)
	case NumberValue:
		return v.Text
	case BoolValue:
		return strconv.FormatBool(v.Bool)
	default:
		return "null"
	}
}

func joinTerms(terms []Expr, sep string) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		parts[i] = t.String()
	}
	return "(" + strings.Join(parts, sep) + ")"
}

// quote writes s as a JSON string, escaping only what JSON requires.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			b.WriteString(`\u`)
			h := strconv.FormatInt(int64(r), 16)
			b.WriteString(strings.Repeat("0", 4-len(h)) + h)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
