package listing

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun/dialect"
)

// Where turns a filter into a SQL condition over the schema's columns for
// the dialect named (db.Dialect().Name()): a fragment with bun's ?
// placeholders and its arguments, for q.Where(fragment, args...) or any
// statement bun formats. Identifiers come only from the schema; every
// literal is an argument. The condition means the same on PostgreSQL and
// SQLite (see the package documentation for the semantics). A filter that
// does not fit the schema gives a *FilterError.
func (s *Schema) Where(d dialect.Name, e Expr) (string, []any, error) {
	if err := s.ready(); err != nil {
		return "", nil, err
	}
	fold, ok := folders[d]
	if !ok {
		return "", nil, fmt.Errorf("listing: dialect %s is not supported", d)
	}
	w := &whereBuilder{s: s, fold: fold}
	if err := w.expr(e); err != nil {
		return "", nil, err
	}
	return w.b.String(), w.args, nil
}

// folders give, per dialect, SQL that lower-cases ASCII letters only, so
// that co, sw and ew ignore ASCII case alike everywhere. SQLite's lower()
// does just that; PostgreSQL's does it under the C collation.
var folders = map[dialect.Name]func(column string) string{
	dialect.PG:     func(column string) string { return "lower(" + column + ` COLLATE "C")` },
	dialect.SQLite: func(column string) string { return "lower(" + column + ")" },
}

var sqlOps = map[Op]string{Eq: "=", Ne: "<>", Gt: ">", Ge: ">=", Lt: "<", Le: "<="}

type whereBuilder struct {
	s    *Schema
	fold func(column string) string
	b    strings.Builder
	args []any
}

func (w *whereBuilder) expr(e Expr) error {
	switch e := e.(type) {
	case *And:
		return w.join(e.Terms, " AND ")
	case *Or:
		return w.join(e.Terms, " OR ")
	case *Not:
		// Comparisons with NULL are NULL, and NOT NULL is NULL: COALESCE
		// makes not the exact complement of what it negates.
		w.b.WriteString("NOT COALESCE(")
		if err := w.expr(e.Expr); err != nil {
			return err
		}
		w.b.WriteString(", FALSE)")
		return nil
	case *Present:
		a, err := w.attribute(e.Attr)
		if err != nil {
			return err
		}
		w.present(a, true)
		return nil
	case *Compare:
		return w.compare(e)
	default:
		return fmt.Errorf("listing: unknown filter node %T", e)
	}
}

func (w *whereBuilder) join(terms []Expr, sep string) error {
	if len(terms) == 0 {
		return fmt.Errorf("listing: empty%s", strings.ToLower(sep))
	}
	w.b.WriteByte('(')
	for i, t := range terms {
		if i > 0 {
			w.b.WriteString(sep)
		}
		if err := w.expr(t); err != nil {
			return err
		}
	}
	w.b.WriteByte(')')
	return nil
}

// attribute resolves a path to a filterable attribute.
func (w *whereBuilder) attribute(p AttrPath) (*Attribute, error) {
	a := w.s.attr(p.String())
	switch {
	case a == nil:
		return nil, &FilterError{Pos: p.Pos, Msg: fmt.Sprintf("unknown attribute %q; filterable attributes are %s", p.String(), w.filterable())}
	case !a.Filter:
		return nil, &FilterError{Pos: p.Pos, Msg: fmt.Sprintf("attribute %q cannot be filtered on; filterable attributes are %s", a.Name, w.filterable())}
	}
	return a, nil
}

func (w *whereBuilder) filterable() string {
	return w.s.names(func(a *Attribute) bool { return a.Filter })
}

// present writes "has a value" (pr), or its complement. A string has a
// value when it is neither NULL nor empty.
func (w *whereBuilder) present(a *Attribute, has bool) {
	col := quoteIdent(a.Column)
	switch {
	case a.Type == TypeString && has:
		fmt.Fprintf(&w.b, "(%s IS NOT NULL AND %s <> '')", col, col)
	case a.Type == TypeString:
		fmt.Fprintf(&w.b, "(%s IS NULL OR %s = '')", col, col)
	case has:
		w.b.WriteString(col + " IS NOT NULL")
	default:
		w.b.WriteString(col + " IS NULL")
	}
}

func (w *whereBuilder) compare(e *Compare) error {
	a, err := w.attribute(e.Attr)
	if err != nil {
		return err
	}
	if e.Value.Kind == NullValue {
		if e.Op != Eq && e.Op != Ne {
			return &FilterError{Pos: e.Value.Pos, Msg: fmt.Sprintf("null can only be compared with eq or ne, not %s", e.Op)}
		}
		w.present(a, e.Op == Ne)
		return nil
	}
	switch e.Op {
	case Co, Sw, Ew:
		if a.Type != TypeString {
			return &FilterError{Pos: e.Attr.Pos, Msg: fmt.Sprintf("%s works on strings only; attribute %q is %s", e.Op, a.Name, a.Type)}
		}
	case Gt, Ge, Lt, Le:
		if a.Type == TypeBoolean {
			return &FilterError{Pos: e.Attr.Pos, Msg: fmt.Sprintf("%s does not apply to the boolean attribute %q", e.Op, a.Name)}
		}
	}
	arg, err := literal(a, e.Value)
	if err != nil {
		return err
	}
	col := quoteIdent(a.Column)
	if e.Op == Co || e.Op == Sw || e.Op == Ew {
		pattern := escapeLike(asciiLower(arg.(string)))
		if e.Op != Sw {
			pattern = "%" + pattern
		}
		if e.Op != Ew {
			pattern += "%"
		}
		w.b.WriteString(w.fold(col) + ` LIKE ? ESCAPE '\'`)
		w.args = append(w.args, pattern)
		return nil
	}
	op, ok := sqlOps[e.Op]
	if !ok {
		return &FilterError{Pos: e.Attr.Pos, Msg: fmt.Sprintf("unknown operator %q", string(e.Op))}
	}
	w.b.WriteString(col + " " + op + " ?")
	w.args = append(w.args, arg)
	return nil
}

// literal converts a filter literal to the Go value bound for a of its
// type: string, int64, bool or a UTC time.Time.
func literal(a *Attribute, v Value) (any, error) {
	mismatch := func(hint string) error {
		return &FilterError{Pos: v.Pos, Msg: fmt.Sprintf("attribute %q is %s: %s is not one%s", a.Name, a.Type, v.String(), hint)}
	}
	switch {
	case a.Type == TypeString && v.Kind == StringValue:
		return v.Text, nil
	case a.Type == TypeBoolean && v.Kind == BoolValue:
		return v.Bool, nil
	case a.Type == TypeInteger && v.Kind == NumberValue,
		a.Type == TypeID && (v.Kind == NumberValue || v.Kind == StringValue):
		n, err := strconv.ParseInt(v.Text, 10, 64)
		if err != nil {
			return nil, mismatch(" (a whole number of at most 19 digits)")
		}
		return n, nil
	case a.Type == TypeTime && v.Kind == StringValue:
		t, err := time.Parse(time.RFC3339Nano, v.Text)
		if err != nil {
			return nil, mismatch(` (write RFC 3339, such as "2024-05-01T10:00:00Z")`)
		}
		return t.UTC(), nil
	default:
		return nil, mismatch("")
	}
}

// asciiLower lower-cases ASCII letters only, as the SQL of folders does.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// escapeLike makes s match itself in a LIKE pattern with ESCAPE '\'.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
