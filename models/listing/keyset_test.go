package listing

import (
	"database/sql"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestKeyColumns(t *testing.T) {
	tests := []struct {
		sort string
		want string
	}{
		{"", `"name" ASC, "id" ASC`}, // the schema's default sort
		{"-rank,createdAt", `"rank" DESC, "created_at" ASC, "id" ASC`},
		{"-id", `"id" DESC`},
		{"name,id,rank", `"name" ASC, "id" ASC`}, // nothing after the unique key matters
	}
	for _, tt := range tests {
		sort, err := itemSchema.parseSort(tt.sort)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := itemSchema.keyColumns(sort)
		if err != nil || orderBy(cols) != tt.want {
			t.Errorf("sort %q: ORDER BY %s, %v; want %s", tt.sort, orderBy(cols), err, tt.want)
		}
	}
	var pe *ParamError
	if _, err := itemSchema.keyColumns([]SortKey{{Attr: "note"}}); !errors.As(err, &pe) || pe.Param != "sort" {
		t.Errorf("sorting by a non-sortable attribute: %v", err)
	}
}

func TestKeysetWhere(t *testing.T) {
	cols := []keyColumn{{column: "rank", desc: true}, {column: "name"}, {column: "id"}}
	sql, args := keysetWhere(cols, []any{int64(3), "b", int64(7)})
	want := `"rank" <= ? AND (("rank" < ?) OR ("rank" = ? AND "name" > ?) OR ("rank" = ? AND "name" = ? AND "id" > ?))`
	wantArgs := []any{int64(3), int64(3), int64(3), "b", int64(3), "b", int64(7)}
	if sql != want || !reflect.DeepEqual(args, wantArgs) {
		t.Errorf("keysetWhere =\n  %s %v\nwant\n  %s %v", sql, args, want, wantArgs)
	}
	sql, args = keysetWhere([]keyColumn{{column: "id", desc: true}}, []any{int64(9)})
	if sql != `("id" < ?)` || !reflect.DeepEqual(args, []any{int64(9)}) {
		t.Errorf("keysetWhere(id desc) = %s %v", sql, args)
	}
}

func TestKeyValue(t *testing.T) {
	at := time.Date(2024, 1, 2, 3, 4, 5, 6000, time.FixedZone("x", 7200))
	str := "s"
	type status string
	tests := []struct {
		v    any
		typ  Type
		want any
	}{
		{"s", TypeString, "s"},
		{status("on"), TypeString, "on"},
		{&str, TypeString, "s"},
		{sql.NullString{String: "n", Valid: true}, TypeString, "n"},
		{int32(-4), TypeInteger, int64(-4)},
		{uint16(4), TypeID, int64(4)},
		{sql.NullInt64{Int64: 9, Valid: true}, TypeInteger, int64(9)},
		{true, TypeBoolean, true},
		{at, TypeTime, at.UTC()},
		{sql.NullTime{Time: at, Valid: true}, TypeTime, at.UTC()},
	}
	for _, tt := range tests {
		got, err := keyValue(reflect.ValueOf(tt.v), tt.typ)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("keyValue(%#v, %s) = %#v, %v; want %#v", tt.v, tt.typ, got, err, tt.want)
		}
	}
	bad := []struct {
		v    any
		typ  Type
		want string
	}{
		{(*string)(nil), TypeString, "NOT NULL"},
		{sql.NullString{}, TypeString, "NOT NULL"},
		{uint64(1 << 63), TypeInteger, "cannot be an integer"},
		{"1", TypeInteger, "holds a string, which cannot be an integer"},
		{1, TypeTime, "cannot be a date-time"},
		{1.5, TypeInteger, "cannot be"},
	}
	for _, tt := range bad {
		_, err := keyValue(reflect.ValueOf(tt.v), tt.typ)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("keyValue(%#v, %s) error = %v; want %q", tt.v, tt.typ, err, tt.want)
		}
	}
	if !errors.Is(func() error { _, err := keyValue(reflect.ValueOf((*int)(nil)), TypeInteger); return err }(), errNullKey) {
		t.Error("a nil pointer is not errNullKey")
	}
}
