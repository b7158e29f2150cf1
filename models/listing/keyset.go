package listing

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// keyColumn is one column of the total order a list is paged in.
type keyColumn struct {
	column string // as declared: column or table.column
	typ    Type
	desc   bool
}

// keyColumns returns the total order of a page: the sort keys (the
// schema's default when there are none), then Key ascending to break ties,
// unless a sort key already is Key.
func (s *Schema) keyColumns(sort []SortKey) ([]keyColumn, error) {
	if len(sort) == 0 {
		sort = s.defaultSort
	}
	var cols []keyColumn
	for _, k := range sort {
		a := s.attr(k.Attr)
		if a == nil || !a.Sort {
			return nil, &ParamError{Param: "sort", Detail: fmt.Sprintf("cannot sort by %q", k.Attr)}
		}
		cols = append(cols, keyColumn{column: a.Column, typ: a.Type, desc: k.Desc})
		if a.Column == s.Key {
			return cols, nil
		}
	}
	return append(cols, keyColumn{column: s.Key, typ: TypeID}), nil
}

// orderBy writes the ORDER BY list of cols.
func orderBy(cols []keyColumn) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		dir := " ASC"
		if c.desc {
			dir = " DESC"
		}
		parts[i] = quoteIdent(c.column) + dir
	}
	return strings.Join(parts, ", ")
}

// keysetWhere writes the condition "comes after the row whose key values are
// vals" in the order cols, each column in its own direction:
//
//	c1 >= v1 AND ((c1 > v1) OR (c1 = v1 AND c2 < v2) OR (c1 = v1 AND c2 = v2 AND id > v3))
//
// The leading c1 >= v1 changes nothing but lets an index on c1 bound the scan.
func keysetWhere(cols []keyColumn, vals []any) (string, []any) {
	var b strings.Builder
	var args []any
	cmp := func(c keyColumn, strict bool) string {
		op := ">"
		if c.desc {
			op = "<"
		}
		if !strict {
			op += "="
		}
		return quoteIdent(c.column) + " " + op + " ?"
	}
	if len(cols) > 1 {
		b.WriteString(cmp(cols[0], false) + " AND (")
		args = append(args, vals[0])
	}
	for i := range cols {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('(')
		//nolint:gosec // j < i < len(cols) == len(vals)
		for j := range i {
			b.WriteString(quoteIdent(cols[j].column) + " = ? AND ")
			args = append(args, vals[j])
		}
		b.WriteString(cmp(cols[i], true) + ")")
		args = append(args, vals[i])
	}
	if len(cols) > 1 {
		b.WriteByte(')')
	}
	return b.String(), args
}

var errNullKey = errors.New("is NULL; sortable columns must be NOT NULL")

// rowKey reads the values of cols from a scanned row (a struct, or a
// pointer to one, addressable) through bun's mapping of columns to fields.
func rowKey(db *bun.DB, row reflect.Value, cols []keyColumn) ([]any, error) {
	for row.Kind() == reflect.Pointer {
		if row.IsNil() {
			return nil, errors.New("listing: a scanned row is nil")
		}
		row = row.Elem()
	}
	if row.Kind() != reflect.Struct {
		return nil, fmt.Errorf("listing: rows of type %s are not structs", row.Type())
	}
	table := db.Table(row.Type())
	vals := make([]any, len(cols))
	for i, c := range cols {
		name := c.column[strings.LastIndexByte(c.column, '.')+1:]
		field := table.LookupField(name)
		if field == nil {
			return nil, fmt.Errorf("listing: %s has no field for the sort column %q", row.Type(), name)
		}
		v, err := keyValue(field.Value(row), c.typ)
		if err != nil {
			return nil, fmt.Errorf("listing: sort column %q of %s %w", name, row.Type(), err)
		}
		vals[i] = v
	}
	return vals, nil
}

var timeType = reflect.TypeFor[time.Time]()

// keyValue converts a field's value to the Go value bound for a column of
// type t: string, int64, bool or a UTC time.Time.
func keyValue(v reflect.Value, t Type) (any, error) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil, errNullKey
		}
		v = v.Elem()
	}
	if !v.CanInterface() {
		return nil, errors.New("is not an exported field")
	}
	if valuer, ok := v.Interface().(driver.Valuer); ok {
		dv, err := valuer.Value()
		if err != nil {
			return nil, err
		}
		if dv == nil {
			return nil, errNullKey
		}
		v = reflect.ValueOf(dv)
	}
	switch {
	case t == TypeString && v.Kind() == reflect.String:
		return v.String(), nil
	case t == TypeBoolean && v.Kind() == reflect.Bool:
		return v.Bool(), nil
	case t == TypeTime && v.Type() == timeType:
		return v.Interface().(time.Time).UTC(), nil
	case (t == TypeInteger || t == TypeID) && v.CanInt():
		return v.Int(), nil
	case (t == TypeInteger || t == TypeID) && v.CanUint() && v.Uint() <= math.MaxInt64:
		return int64(v.Uint()), nil //nolint:gosec // checked at most math.MaxInt64 above
	default:
		return nil, fmt.Errorf("holds a %s, which cannot be %s", v.Type(), t)
	}
}
