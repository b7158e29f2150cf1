package listing

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun/dialect"
)

func TestSchema_Where(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 8, 0, 0, 500, time.UTC)
	tests := []struct {
		filter string
		sql    string
		args   []any
	}{
		{`name eq "Bob"`, `"name" = ?`, []any{"Bob"}},
		{`NAME Eq "Bob"`, `"name" = ?`, []any{"Bob"}},
		{`name ne "Bob"`, `"name" <> ?`, []any{"Bob"}},
		{`name gt "B"`, `"name" > ?`, []any{"B"}},
		{`name le "B"`, `"name" <= ?`, []any{"B"}},
		{`rank ge 3`, `"rank" >= ?`, []any{int64(3)}},
		{`rank lt -3`, `"rank" < ?`, []any{int64(-3)}},
		{`id eq "12345678901234"`, `"id" = ?`, []any{int64(12345678901234)}},
		{`id eq 42`, `"id" = ?`, []any{int64(42)}},
		{`active eq true`, `"active" = ?`, []any{true}},
		{`active ne false`, `"active" <> ?`, []any{false}},
		{`createdAt gt "2024-05-01T10:00:00.0000005+02:00"`, `"created_at" > ?`, []any{t0}},
		{`owner.name eq "x"`, `"owner_name" = ?`, []any{"x"}},
		{`Owner.Name eq "x"`, `"owner_name" = ?`, []any{"x"}},
		// co, sw and ew fold ASCII case and escape LIKE's metacharacters.
		{`name co "Ab"`, `lower("name" COLLATE "C") LIKE ? ESCAPE '\'`, []any{"%ab%"}},
		{`name sw "ÉA"`, `lower("name" COLLATE "C") LIKE ? ESCAPE '\'`, []any{"Éa%"}},
		{`name ew "100%_\\"`, `lower("name" COLLATE "C") LIKE ? ESCAPE '\'`, []any{`%100\%\_\\`}},
		// pr and null.
		{`name pr`, `("name" IS NOT NULL AND "name" <> '')`, nil},
		{`rank pr`, `"rank" IS NOT NULL`, nil},
		{`note eq null`, `("note" IS NULL OR "note" = '')`, nil},
		{`note ne null`, `("note" IS NOT NULL AND "note" <> '')`, nil},
		{`score eq null`, `"score" IS NULL`, nil},
		{`score ne null`, `"score" IS NOT NULL`, nil},
		// Logic.
		{`name eq "a" and rank gt 1 or not (active eq true)`,
			`(("name" = ? AND "rank" > ?) OR NOT COALESCE("active" = ?, FALSE))`,
			[]any{"a", int64(1), true}},
		{`not (name eq "a" or score lt 2)`,
			`NOT COALESCE(("name" = ? OR "score" < ?), FALSE)`,
			[]any{"a", int64(2)}},
		// Hostile strings stay arguments.
		{`name eq "x' OR 1=1 --"`, `"name" = ?`, []any{"x' OR 1=1 --"}},
		{`name eq "?"`, `"name" = ?`, []any{"?"}},
	}
	for _, tt := range tests {
		e, err := ParseFilter(tt.filter)
		if err != nil {
			t.Fatalf("ParseFilter(%q): %v", tt.filter, err)
		}
		sql, args, err := itemSchema.Where(dialect.PG, e)
		if err != nil {
			t.Errorf("Where(%q): %v", tt.filter, err)
			continue
		}
		if sql != tt.sql || !reflect.DeepEqual(args, tt.args) {
			t.Errorf("Where(%q) =\n  %s %#v\nwant\n  %s %#v", tt.filter, sql, args, tt.sql, tt.args)
		}
	}
}

func TestSchema_Where_SQLite(t *testing.T) {
	e, _ := ParseFilter(`name co "X" and not (owner.name sw "y")`)
	sql, args, err := itemSchema.Where(dialect.SQLite, e)
	want := `(lower("name") LIKE ? ESCAPE '\' AND NOT COALESCE(lower("owner_name") LIKE ? ESCAPE '\', FALSE))`
	if err != nil || sql != want || !reflect.DeepEqual(args, []any{"%x%", "y%"}) {
		t.Errorf("Where = %s %v %v; want %s", sql, args, err, want)
	}
	if _, _, err := itemSchema.Where(dialect.MySQL, e); err == nil {
		t.Error("Where accepted MySQL")
	}
}

func TestSchema_Where_Errors(t *testing.T) {
	tests := []struct {
		filter string
		pos    int
		want   string
	}{
		{`nope eq 1`, 1, `unknown attribute "nope"; filterable attributes are id, name, rank, active, createdAt, note, score, owner.name`},
		{`name eq "a" and owner.nope eq 1`, 17, `unknown attribute "owner.nope"`},
		{`secret eq "x"`, 1, `attribute "secret" cannot be filtered on`},
		{`owner pr`, 1, `attribute "owner" cannot be filtered on`},
		{`rank eq "x"`, 9, `attribute "rank" is an integer: "x" is not one`},
		{`rank eq 1.5`, 9, `attribute "rank" is an integer: 1.5 is not one`},
		{`rank eq 1e3`, 9, `is not one`},
		{`rank eq 99999999999999999999`, 9, `at most 19 digits`},
		{`rank eq true`, 9, `is not one`},
		{`name eq 5`, 9, `attribute "name" is a string: 5 is not one`},
		{`name eq false`, 9, `is a string`},
		{`active eq 1`, 11, `attribute "active" is a boolean: 1 is not one`},
		{`active eq "true"`, 11, `is a boolean`},
		{`id eq "abc"`, 7, `attribute "id" is an id`},
		{`id eq true`, 7, `is an id`},
		{`createdAt gt "yesterday"`, 14, `is a date-time: "yesterday" is not one (write RFC 3339`},
		{`createdAt gt 5`, 14, `is a date-time`},
		{`rank co "1"`, 1, `co works on strings only; attribute "rank" is an integer`},
		{`createdAt sw "2024"`, 1, `sw works on strings only`},
		{`active gt false`, 1, `gt does not apply to the boolean attribute "active"`},
		{`rank gt null`, 9, `null can only be compared with eq or ne, not gt`},
		{`name co null`, 9, `null can only be compared with eq or ne`},
	}
	for _, tt := range tests {
		e, err := ParseFilter(tt.filter)
		if err != nil {
			t.Fatalf("ParseFilter(%q): %v", tt.filter, err)
		}
		_, _, err = itemSchema.Where(dialect.PG, e)
		var fe *FilterError
		if !errors.As(err, &fe) || fe.Pos != tt.pos || !strings.Contains(fe.Msg, tt.want) {
			t.Errorf("Where(%q) error = %v; want at %d %q", tt.filter, err, tt.pos, tt.want)
		}
	}
}

func TestSchema_Where_HandBuilt(t *testing.T) {
	for _, e := range []Expr{nil, &And{}, &Or{}, &Not{}, &Compare{Attr: AttrPath{Name: "name"}, Op: "xx", Value: Value{Kind: StringValue}}} {
		if _, _, err := itemSchema.Where(dialect.PG, e); err == nil {
			t.Errorf("Where(%#v) gave no error", e)
		}
	}
	var unready Schema
	if _, _, err := unready.Where(dialect.PG, &Present{Attr: AttrPath{Name: "name"}}); err == nil {
		t.Error("a schema not made by NewSchema was used")
	}
}
