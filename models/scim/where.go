package scim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cond is a SQL condition with its bound parameters.
type cond struct {
	sql  string
	args []any
}

var (
	condTrue  = cond{sql: "1 = 1"}
	condFalse = cond{sql: "1 = 0"}
)

func invalidFilter(format string, args ...any) error {
	return &FilterError{Msg: fmt.Sprintf(format, args...)}
}

// where translates a parsed filter into a condition over r's table, every
// value a bound parameter. Errors are *FilterError (invalidFilter): an
// unknown attribute, an operator the attribute does not take, a value of
// the wrong kind.
func (r *resource) where(e Expr) (cond, error) {
	return r.compile(e, nil)
}

func (r *resource) compile(e Expr, row valueRow) (cond, error) {
	switch e := e.(type) {
	case *Logical:
		l, err := r.compile(e.Left, row)
		if err != nil {
			return cond{}, err
		}
		rt, err := r.compile(e.Right, row)
		if err != nil {
			return cond{}, err
		}
		op := " AND "
		if e.Op == "or" {
			op = " OR "
		}
		return cond{sql: "(" + l.sql + op + rt.sql + ")", args: append(l.args, rt.args...)}, nil
	case *Not:
		x, err := r.compile(e.X, row)
		if err != nil {
			return cond{}, err
		}
		return cond{sql: "NOT (" + x.sql + ")", args: x.args}, nil
	case *ValuePath:
		if row != nil {
			return cond{}, invalidFilter("value paths do not nest")
		}
		if e.Sub != "" {
			return cond{}, invalidFilter("a filter's value path takes no sub-attribute after ]")
		}
		if r == groupResource && strings.EqualFold(e.Path.Attr, "members") {
			return membersCond(e.Filter)
		}
		rows, ok := r.rows(e.Path)
		if !ok {
			return cond{}, invalidFilter("%s is not a multi-valued attribute that can be filtered", e.Path)
		}
		return r.anyRow(rows, func(vr valueRow) (cond, error) { return r.compile(e.Filter, vr) })
	case *Compare:
		if row != nil {
			name := strings.ToLower(e.Path.Attr)
			if e.Path.URN != "" || e.Path.Sub != "" {
				return cond{}, invalidFilter("%s is not a sub-attribute", e.Path)
			}
			col, ok := row[name]
			if !ok {
				return condFalse, nil // a sub-attribute this value lacks: no match
			}
			return compare(col, e)
		}
		if col, ok := r.lookup(e.Path); ok {
			return compare(col, e)
		}
		if r == groupResource && strings.EqualFold(e.Path.Attr, "members") && e.Path.URN == "" {
			if e.Op == "pr" && e.Path.Sub == "" {
				return cond{sql: "g.members_count > 0"}, nil
			}
			if e.Path.Sub == "" || strings.EqualFold(e.Path.Sub, "value") {
				return membersCond(&Compare{Path: Path{Attr: "value"}, Op: e.Op, Value: e.Value})
			}
		}
		if rows, ok := r.rows(Path{URN: e.Path.URN, Attr: e.Path.Attr}); ok {
			sub := e.Path.Sub
			if sub == "" {
				sub = "value"
			}
			inner := &Compare{Path: Path{Attr: sub}, Op: e.Op, Value: e.Value}
			return r.anyRow(rows, func(vr valueRow) (cond, error) { return r.compile(inner, vr) })
		}
		return cond{}, invalidFilter("unknown attribute %s", e.Path)
	}
	return cond{}, invalidFilter("unknown filter node")
}

// anyRow is the OR of f over the value rows.
func (r *resource) anyRow(rows []valueRow, f func(valueRow) (cond, error)) (cond, error) {
	var parts []string
	var args []any
	for _, vr := range rows {
		c, err := f(vr)
		if err != nil {
			return cond{}, err
		}
		parts = append(parts, c.sql)
		args = append(args, c.args...)
	}
	if len(parts) == 1 {
		return cond{sql: parts[0], args: args}, nil
	}
	return cond{sql: "(" + strings.Join(parts, " OR ") + ")", args: args}, nil
}

// membersCond is a group's members[filter]: only value eq "<user id>"
// (and value pr) is supported, through the membership table.
func membersCond(e Expr) (cond, error) {
	c, ok := e.(*Compare)
	if !ok || !strings.EqualFold(c.Path.Attr, "value") || c.Path.Sub != "" {
		return cond{}, invalidFilter(`members are filtered by value eq "<user id>" only`)
	}
	switch c.Op {
	case "pr":
		return cond{sql: "g.members_count > 0"}, nil
	case "eq":
		id, ok := idValue(c.Value)
		if !ok {
			return condFalse, nil
		}
		return cond{sql: "EXISTS (SELECT 1 FROM group_members AS gm WHERE gm.group_id = g.id AND gm.user_id = ?)", args: []any{id}}, nil
	}
	return cond{}, invalidFilter(`members are filtered by value eq "<user id>" only`)
}

// idValue reads an id literal: a digit string (or a number).
func idValue(v Value) (int64, bool) {
	if v.Kind != "string" && v.Kind != "number" {
		return 0, false
	}
	id, err := strconv.ParseInt(v.Text, 10, 64)
	return id, err == nil && id > 0
}

// likeEscape escapes the LIKE wildcards of s (the escape character is \).
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

var sqlOps = map[string]string{"eq": "=", "ne": "<>", "gt": ">", "ge": ">=", "lt": "<", "le": "<="}

// compare is one comparison of a column with a literal.
func compare(col column, e *Compare) (cond, error) {
	op, v := e.Op, e.Value
	switch col.kind {
	case kindConst:
		return compareConst(col.value, e)
	case kindText, kindExact:
		if op == "pr" {
			return cond{sql: "COALESCE(" + col.expr + ", '') <> ''"}, nil
		}
		if v.Kind == "null" {
			switch op {
			case "eq":
				return cond{sql: "COALESCE(" + col.expr + ", '') = ''"}, nil
			case "ne":
				return cond{sql: "COALESCE(" + col.expr + ", '') <> ''"}, nil
			}
			return cond{}, invalidFilter("%s %s null is not a comparison", e.Path, op)
		}
		if v.Kind != "string" {
			return cond{}, invalidFilter("%s compares with a string", e.Path)
		}
		lhs, rhs := col.expr, "?"
		if col.kind == kindText {
			lhs, rhs = "lower("+col.expr+")", "lower(?)"
		}
		if col.partial && v.Text != "" && (op == "eq" || op == "co" || op == "sw" || op == "ew") {
			c, err := compare(column{expr: col.expr, kind: col.kind}, e)
			return cond{sql: "(" + c.sql + " AND " + col.expr + " <> '')", args: c.args}, err
		}
		switch op {
		case "co":
			return cond{sql: lhs + " LIKE " + rhs + ` ESCAPE '\'`, args: []any{"%" + likeEscape(v.Text) + "%"}}, nil
		case "sw":
			return cond{sql: lhs + " LIKE " + rhs + ` ESCAPE '\'`, args: []any{likeEscape(v.Text) + "%"}}, nil
		case "ew":
			return cond{sql: lhs + " LIKE " + rhs + ` ESCAPE '\'`, args: []any{"%" + likeEscape(v.Text)}}, nil
		}
		return cond{sql: lhs + " " + sqlOps[op] + " " + rhs, args: []any{v.Text}}, nil
	case kindID:
		if op == "pr" {
			return cond{sql: col.expr + " IS NOT NULL"}, nil
		}
		if v.Kind == "null" && (op == "eq" || op == "ne") {
			if op == "eq" {
				return cond{sql: col.expr + " IS NULL"}, nil
			}
			return cond{sql: col.expr + " IS NOT NULL"}, nil
		}
		if _, ok := sqlOps[op]; !ok {
			return cond{}, invalidFilter("%s takes eq, ne, gt, ge, lt, le and pr", e.Path)
		}
		id, ok := idValue(v)
		if !ok {
			if op == "ne" {
				return condTrue, nil
			}
			if op == "eq" {
				return condFalse, nil
			}
			return cond{}, invalidFilter("%s compares with an id", e.Path)
		}
		return cond{sql: col.expr + " " + sqlOps[op] + " ?", args: []any{id}}, nil
	case kindActive:
		if op == "pr" {
			return condTrue, nil
		}
		b, ok := boolValue(v)
		if !ok || op != "eq" && op != "ne" {
			return cond{}, invalidFilter("%s takes eq or ne with true or false", e.Path)
		}
		if op == "ne" {
			b = !b
		}
		status := 0
		if b {
			status = 1
		}
		return cond{sql: col.expr + " = ?", args: []any{status}}, nil
	case kindTime:
		if op == "pr" {
			return condTrue, nil
		}
		sqlOp, ok := sqlOps[op]
		if !ok || v.Kind != "string" {
			return cond{}, invalidFilter("%s takes eq, ne, gt, ge, lt, le with a date-time", e.Path)
		}
		t, err := time.Parse(time.RFC3339Nano, v.Text)
		if err != nil {
			return cond{}, invalidFilter("%s compares with an RFC 3339 date-time", e.Path)
		}
		return cond{sql: col.expr + " " + sqlOp + " ?", args: []any{t.UTC()}}, nil
	}
	return cond{}, invalidFilter("unknown attribute %s", e.Path)
}

// boolValue reads a boolean literal, also written as a string ("True").
func boolValue(v Value) (bool, bool) {
	switch v.Kind {
	case "bool":
		return v.Bool, true
	case "string":
		b, err := strconv.ParseBool(strings.ToLower(v.Text))
		return b, err == nil
	}
	return false, false
}

// compareConst evaluates a comparison with a constant of a value row (an
// email's type "work") in Go: true or false.
func compareConst(c any, e *Compare) (cond, error) {
	if e.Op == "pr" {
		return condTrue, nil
	}
	var match bool
	switch c := c.(type) {
	case bool:
		b, ok := boolValue(e.Value)
		if !ok || e.Op != "eq" && e.Op != "ne" {
			return cond{}, invalidFilter("%s takes eq or ne with true or false", e.Path)
		}
		match = (b == c) == (e.Op == "eq")
	case string:
		if e.Value.Kind != "string" {
			return condFalse, nil
		}
		a, b := strings.ToLower(c), strings.ToLower(e.Value.Text)
		switch e.Op {
		case "eq":
			match = a == b
		case "ne":
			match = a != b
		case "co":
			match = strings.Contains(a, b)
		case "sw":
			match = strings.HasPrefix(a, b)
		case "ew":
			match = strings.HasSuffix(a, b)
		case "gt":
			match = a > b
		case "ge":
			match = a >= b
		case "lt":
			match = a < b
		case "le":
			match = a <= b
		}
	}
	if match {
		return condTrue, nil
	}
	return condFalse, nil
}
