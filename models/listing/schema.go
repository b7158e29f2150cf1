package listing

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Limits used when a Schema leaves DefaultLimit or MaxLimit zero.
const (
	DefaultLimit    = 100
	DefaultMaxLimit = 1000
)

// Type is the type of a filterable or sortable attribute. It decides which
// literals and operators a filter may use with the attribute.
type Type int

// The attribute types.
const (
	TypeString  Type = iota + 1 // text; literals are strings
	TypeInteger                 // integer; literals are integer numbers
	TypeBoolean                 // boolean; literals true and false; no gt, ge, lt, le
	TypeTime                    // timestamp; literals are RFC 3339 strings
	TypeID                      // int64 id shown as a digit string; literals "123" or 123
)

var typeNames = map[Type]string{
	TypeString: "a string", TypeInteger: "an integer", TypeBoolean: "a boolean",
	TypeTime: "a date-time", TypeID: "an id",
}

// String returns the type's name with its article, for error messages.
func (t Type) String() string {
	if name, ok := typeNames[t]; ok {
		return name
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Paging is how a list moves from page to page.
type Paging int

// The paging kinds of spec 4.0.
const (
	CursorPaging Paging = iota + 1 // opaque keyset cursor; CursorMeta
	OffsetPaging                   // start index "from"; OffsetMeta
)

// MetaLimit says which number a list reports as meta.limit.
type MetaLimit int

// The meta limit rules.
const (
	// MetaLimitApplied reports the page size used: the limit asked for, or
	// DefaultLimit when none was, capped at MaxLimit.
	MetaLimitApplied MetaLimit = iota
	// MetaLimitDefault always reports DefaultLimit, whatever was asked.
	MetaLimitDefault
)

// Attribute is one attribute of a resource as lists see it.
type Attribute struct {
	// Name is the attribute's API name, its JSON name in responses
	// (firstName). A sub-attribute is written parent.child; it can be
	// filtered and sorted on but not picked by fields. Filters and
	// parameters match names case-insensitively.
	Name string
	// Column is the SQL column, column or table.column. It is required when
	// Filter or Sort is set; an attribute without one may only be picked by
	// fields.
	Column string
	// Type is the column's type; required when Filter or Sort is set.
	Type Type
	// Filter allows the attribute in filter.
	Filter bool
	// Sort allows the attribute in sort. A sortable column must be NOT NULL.
	Sort bool
}

// Schema is the allow-list of one list endpoint: which attributes exist,
// which can be filtered and sorted, and how the list pages. Declare it as a
// package variable with MustSchema; see the package documentation.
type Schema struct {
	// Name names the list (users); cursors of one list are refused by another.
	Name string
	// Attributes lists every attribute fields may pick, filter may test and
	// sort may order by.
	Attributes []Attribute
	// Key is the unique int64 column that breaks ties in every order; "id"
	// when empty. It must be a field of the model Fetch scans into.
	Key string
	// DefaultSort is the sort used when a request gives none, in the syntax
	// of the sort parameter (-when_created). Empty means Key ascending.
	DefaultSort string
	// DefaultLimit is the page size when a request gives none
	// (DefaultLimit when zero); MaxLimit caps the limit asked for
	// (DefaultMaxLimit when zero).
	DefaultLimit, MaxLimit int
	// Paging is CursorPaging or OffsetPaging.
	Paging Paging
	// StartIndexString writes meta.start_index as a JSON string ("0"), as
	// management and job lists do. Offset paging only.
	StartIndexString bool
	// MetaLimit is the rule for meta.limit.
	MetaLimit MetaLimit

	byName      map[string]*Attribute // lower-cased name; set by NewSchema
	defaultSort []SortKey
}

// identifier is what a Schema may use as a column: column or table.column.
// Nothing else ever reaches SQL as an identifier.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// attrName is what a Schema may use as an attribute name: name or name.sub.
var attrName = regexp.MustCompile(`^[A-Za-z$_][A-Za-z0-9$_-]*(\.[A-Za-z$_][A-Za-z0-9$_-]*)?$`)

// NewSchema checks a declaration and returns the Schema ready for use, its
// zero limits replaced by the defaults.
func NewSchema(decl Schema) (*Schema, error) {
	s := decl
	s.Attributes = append([]Attribute(nil), decl.Attributes...)
	if s.Key == "" {
		s.Key = "id"
	}
	if s.DefaultLimit == 0 {
		s.DefaultLimit = DefaultLimit
	}
	if s.MaxLimit == 0 {
		s.MaxLimit = DefaultMaxLimit
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Name == "" {
		bad("Name is empty")
	}
	if !identifier.MatchString(s.Key) {
		bad("Key %q is not a column name", s.Key)
	}
	if s.DefaultLimit < 1 || s.MaxLimit < s.DefaultLimit {
		bad("limits must satisfy 1 <= DefaultLimit (%d) <= MaxLimit (%d)", s.DefaultLimit, s.MaxLimit)
	}
	if s.Paging != CursorPaging && s.Paging != OffsetPaging {
		bad("Paging must be CursorPaging or OffsetPaging")
	}
	if s.StartIndexString && s.Paging != OffsetPaging {
		bad("StartIndexString needs OffsetPaging")
	}
	if s.MetaLimit != MetaLimitApplied && s.MetaLimit != MetaLimitDefault {
		bad("MetaLimit %d is not a rule", s.MetaLimit)
	}
	s.byName = make(map[string]*Attribute, len(s.Attributes))
	for i := range s.Attributes {
		a := &s.Attributes[i]
		key := strings.ToLower(a.Name)
		switch {
		case !attrName.MatchString(a.Name):
			bad("attribute name %q is not valid", a.Name)
		case s.byName[key] != nil:
			bad("attribute %q is declared twice", a.Name)
		case a.Column != "" && !identifier.MatchString(a.Column):
			bad("attribute %q: column %q is not a column name", a.Name, a.Column)
		case (a.Filter || a.Sort) && (a.Column == "" || typeNames[a.Type] == ""):
			bad("attribute %q: a filterable or sortable attribute needs a Column and a Type", a.Name)
		}
		s.byName[key] = a
	}
	if len(errs) == 0 {
		sort, err := s.parseSort(s.DefaultSort)
		if err != nil {
			bad("DefaultSort: %v", err)
		}
		s.defaultSort = sort
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("listing: schema %q: %w", decl.Name, err)
	}
	return &s, nil
}

// MustSchema is NewSchema for package-level declarations: it panics when
// the declaration is wrong, which is a programming error found at start-up.
func MustSchema(decl Schema) *Schema {
	s, err := NewSchema(decl)
	if err != nil {
		panic(err)
	}
	return s
}

// ready reports an error when s was not made by NewSchema.
func (s *Schema) ready() error {
	if s == nil || s.byName == nil {
		return errors.New("listing: the schema was not made with NewSchema")
	}
	return nil
}

// attr returns the attribute called name, matched case-insensitively, or nil.
func (s *Schema) attr(name string) *Attribute {
	return s.byName[strings.ToLower(name)]
}

// quoteIdent quotes a column checked by identifier: table.column becomes
// "table"."column". Both dialects read double-quoted identifiers.
func quoteIdent(column string) string {
	return `"` + strings.ReplaceAll(column, ".", `"."`) + `"`
}
