package listing

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestParse_OK(t *testing.T) {
	tests := []struct {
		query string
		s     *Schema
		want  Params
	}{
		{"", itemSchema, Params{Limit: 100}},
		{"filter=&sort=&fields=&limit=&cursor=", itemSchema, Params{Limit: 100}},
		{"licensing=both&limit=10", itemSchema, Params{Limit: 10}},
		{"limit=500", itemSchema, Params{Limit: 500}},
		{"limit=501", itemSchema, Params{Limit: 500}},
		{"limit=99999999999999999999999", itemSchema, Params{Limit: 500}},
		{"sort=-NAME,%20rank%20,createdAt", itemSchema, Params{Limit: 100, Sort: []SortKey{{"name", true}, {"rank", false}, {"createdAt", false}}}},
		{"fields=NAME,rank,name,owner", itemSchema, Params{Limit: 100, Fields: []string{"name", "rank", "owner"}}},
		{"from=0", itemOffsetSchema, Params{Limit: 200}},
		{"from=40&limit=20", itemOffsetSchema, Params{Limit: 20, From: 40}},
	}
	for _, tt := range tests {
		q, _ := url.ParseQuery(tt.query)
		got, err := Parse(q, tt.s)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tt.query, got, err, tt.want)
		}
	}

	q := url.Values{"filter": {`name sw "a" and rank gt 2`}}
	got, err := Parse(q, itemSchema)
	if err != nil || got.Filter == nil || got.Filter.String() != `(name sw "a" and rank gt 2)` {
		t.Errorf("Parse(filter) = %+v, %v", got, err)
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		query  url.Values
		s      *Schema
		param  string
		detail string
	}{
		{url.Values{"filter": {"name eq"}}, itemSchema, "filter", "at character 8: expected a value"},
		{url.Values{"filter": {"bogus pr"}}, itemSchema, "filter", `at character 1: unknown attribute "bogus"`},
		{url.Values{"filter": {`rank eq "x"`}}, itemSchema, "filter", `attribute "rank" is an integer`},
		{url.Values{"filter": {"a pr", "b pr"}}, itemSchema, "filter", "is given more than once"},
		{url.Values{"sort": {"bogus"}}, itemSchema, "sort", `cannot sort by "bogus"; sortable attributes are id, name, rank, active, createdAt`},
		{url.Values{"sort": {"note"}}, itemSchema, "sort", `cannot sort by "note"`},
		{url.Values{"sort": {"name,,rank"}}, itemSchema, "sort", "empty sort key"},
		{url.Values{"sort": {"-"}}, itemSchema, "sort", "empty sort key"},
		{url.Values{"sort": {"name,-Name"}}, itemSchema, "sort", `names "name" twice`},
		{url.Values{"fields": {"name,bogus"}}, itemSchema, "fields", `unknown field "bogus"; fields are id, name, rank, active, createdAt, note, score, secret, owner`},
		{url.Values{"fields": {"owner.name"}}, itemSchema, "fields", `unknown field "owner.name"`},
		{url.Values{"fields": {"name,"}}, itemSchema, "fields", "empty field name"},
		{url.Values{"limit": {"0"}}, itemSchema, "limit", "must be a positive whole number"},
		{url.Values{"limit": {"-5"}}, itemSchema, "limit", "must be a positive whole number"},
		{url.Values{"limit": {"-99999999999999999999999"}}, itemSchema, "limit", "must be a positive whole number"},
		{url.Values{"limit": {"ten"}}, itemSchema, "limit", "must be a positive whole number"},
		{url.Values{"limit": {"1.5"}}, itemSchema, "limit", "must be a positive whole number"},
		{url.Values{"from": {"0"}}, itemSchema, "from", "this list pages with cursor, not from"},
		{url.Values{"cursor": {"abc"}}, itemOffsetSchema, "cursor", "this list pages with from, not cursor"},
		{url.Values{"from": {"-1"}}, itemOffsetSchema, "from", "must be a whole number from 0"},
		{url.Values{"from": {"x"}}, itemOffsetSchema, "from", "must be a whole number from 0"},
		{url.Values{"from": {"2147483648"}}, itemOffsetSchema, "from", "must be a whole number from 0"},
		{url.Values{"cursor": {"!!!"}}, itemSchema, "cursor", "is not a cursor of this list"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.query, tt.s)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != tt.param || !strings.Contains(pe.Detail, tt.detail) {
			t.Errorf("Parse(%v) error = %v; want %s: %s", tt.query, err, tt.param, tt.detail)
			continue
		}
		if !strings.Contains(pe.Error(), `"`+tt.param+`"`) {
			t.Errorf("Error() = %q does not name the parameter", pe.Error())
		}
	}
}

func TestParse_UnreadySchema(t *testing.T) {
	if _, err := Parse(url.Values{}, &Schema{Name: "x"}); err == nil {
		t.Error("Parse accepted a schema not made by NewSchema")
	}
}

func TestNewSchema(t *testing.T) {
	ok := Schema{Name: "x", Paging: OffsetPaging, Attributes: []Attribute{{Name: "id", Column: "id", Type: TypeID, Sort: true}}}
	s, err := NewSchema(ok)
	if err != nil {
		t.Fatal(err)
	}
	if s.Key != "id" || s.DefaultLimit != DefaultLimit || s.MaxLimit != DefaultMaxLimit {
		t.Errorf("defaults not applied: %+v", s)
	}

	bad := []struct {
		edit func(*Schema)
		want string
	}{
		{func(s *Schema) { s.Name = "" }, "Name is empty"},
		{func(s *Schema) { s.Paging = 0 }, "Paging must be"},
		{func(s *Schema) { s.Key = `id"; drop` }, "Key"},
		{func(s *Schema) { s.DefaultLimit, s.MaxLimit = 50, 10 }, "limits must satisfy"},
		{func(s *Schema) { s.DefaultLimit = -1 }, "limits must satisfy"},
		{func(s *Schema) { s.StartIndexString, s.Paging = true, CursorPaging }, "StartIndexString needs OffsetPaging"},
		{func(s *Schema) { s.MetaLimit = 7 }, "MetaLimit"},
		{func(s *Schema) { s.Attributes = append(s.Attributes, Attribute{Name: "ID"}) }, "declared twice"},
		{func(s *Schema) { s.Attributes = append(s.Attributes, Attribute{Name: "a b"}) }, "not valid"},
		{func(s *Schema) { s.Attributes = append(s.Attributes, Attribute{Name: "a.b.c"}) }, "not valid"},
		{func(s *Schema) {
			s.Attributes = append(s.Attributes, Attribute{Name: "a", Column: "a; drop table x", Type: TypeString})
		}, "not a column name"},
		{func(s *Schema) {
			s.Attributes = append(s.Attributes, Attribute{Name: "a", Filter: true, Type: TypeString})
		}, "needs a Column and a Type"},
		{func(s *Schema) { s.Attributes = append(s.Attributes, Attribute{Name: "a", Sort: true, Column: "a"}) }, "needs a Column and a Type"},
		{func(s *Schema) { s.DefaultSort = "nope" }, `DefaultSort: cannot sort by "nope"`},
	}
	for _, tt := range bad {
		decl := ok
		decl.Attributes = append([]Attribute(nil), ok.Attributes...)
		tt.edit(&decl)
		if _, err := NewSchema(decl); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewSchema error = %v; want %q", err, tt.want)
		}
	}

	defer func() {
		if recover() == nil {
			t.Error("MustSchema did not panic on a bad declaration")
		}
	}()
	MustSchema(Schema{})
}

func TestQuoteIdent(t *testing.T) {
	if got := quoteIdent("users.first_name"); got != `"users"."first_name"` {
		t.Errorf("quoteIdent = %s", got)
	}
}
