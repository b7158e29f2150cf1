package listing

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/uptrace/bun/dialect"
)

// ParamError reports a bad list query parameter. The API answers it with
// HTTP 400, code 00000107 "Invalid Parameter", and Error() as the detail.
type ParamError struct {
	Param  string // the query parameter: filter, sort, fields, limit, cursor or from
	Detail string // what is wrong with it
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("invalid query parameter %q: %s", e.Param, e.Detail)
}

// SortKey is one key of a sort: an attribute's canonical name and direction.
type SortKey struct {
	Attr string
	Desc bool
}

// Params are the list parameters of one request, checked against a Schema.
type Params struct {
	Filter Expr      // nil: no filter
	Sort   []SortKey // empty: the schema's DefaultSort
	Fields []string  // canonical attribute names to return; empty: all
	Limit  int       // page size; 0: the schema's DefaultLimit
	Cursor string    // cursor paging: the next_cursor of the previous page; "": first page
	From   int       // offset paging: index of the first row, from 0
}

// Parse reads the list parameters filter, sort, fields, limit and cursor
// (cursor paging) or from (offset paging) from a request's query and checks
// them against s. Other parameters are left to the caller. A bad one gives a
// *ParamError; an empty one counts as absent. A limit above s.MaxLimit is
// lowered to it.
func Parse(query url.Values, s *Schema) (Params, error) {
	var p Params
	if err := s.ready(); err != nil {
		return p, err
	}
	param := map[string]string{}
	for _, name := range []string{"filter", "sort", "fields", "limit", "cursor", "from"} {
		switch vs := query[name]; len(vs) {
		case 0:
		case 1:
			param[name] = strings.TrimSpace(vs[0])
		default:
			return p, &ParamError{Param: name, Detail: "is given more than once"}
		}
	}
	filter, sort, fields, limit, cursor, from := param["filter"], param["sort"], param["fields"], param["limit"], param["cursor"], param["from"]

	var err error
	if filter != "" {
		if p.Filter, err = s.parseFilter(filter); err != nil {
			return p, &ParamError{Param: "filter", Detail: err.Error()}
		}
	}
	if sort != "" {
		if p.Sort, err = s.parseSort(sort); err != nil {
			return p, &ParamError{Param: "sort", Detail: err.Error()}
		}
	}
	if fields != "" {
		if p.Fields, err = s.parseFields(fields); err != nil {
			return p, &ParamError{Param: "fields", Detail: err.Error()}
		}
	}
	if p.Limit, err = s.parseLimit(limit); err != nil {
		return p, &ParamError{Param: "limit", Detail: err.Error()}
	}
	switch {
	case s.Paging == CursorPaging && from != "":
		return p, &ParamError{Param: "from", Detail: "this list pages with cursor, not from"}
	case s.Paging == OffsetPaging && cursor != "":
		return p, &ParamError{Param: "cursor", Detail: "this list pages with from, not cursor"}
	case cursor != "":
		if _, err := s.decodeCursor(cursor, p); err != nil {
			return p, err
		}
		p.Cursor = cursor
	case from != "":
		n, err := strconv.Atoi(from)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return p, &ParamError{Param: "from", Detail: "must be a whole number from 0 to 2147483647"}
		}
		p.From = n
	}
	return p, nil
}

// parseFilter parses a filter and checks it against s.
func (s *Schema) parseFilter(text string) (Expr, error) {
	e, err := ParseFilter(text)
	if err != nil {
		return nil, err
	}
	if _, _, err := s.Where(dialect.PG, e); err != nil {
		return nil, err
	}
	return e, nil
}

// parseSort reads a sort: comma-separated sortable attributes, each
// ascending or, with a leading -, descending.
func (s *Schema) parseSort(text string) ([]SortKey, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	var keys []SortKey
	seen := map[string]bool{}
	for _, part := range strings.Split(text, ",") {
		part = strings.TrimSpace(part)
		name, desc := strings.CutPrefix(part, "-")
		a := s.attr(name)
		switch {
		case name == "":
			return nil, errors.New("has an empty sort key")
		case a == nil || !a.Sort:
			return nil, fmt.Errorf("cannot sort by %q; sortable attributes are %s", name, s.names(func(a *Attribute) bool { return a.Sort }))
		case seen[a.Name]:
			return nil, fmt.Errorf("names %q twice", a.Name)
		}
		seen[a.Name] = true
		keys = append(keys, SortKey{Attr: a.Name, Desc: desc})
	}
	return keys, nil
}

// parseFields reads fields: comma-separated top-level attribute names.
func (s *Schema) parseFields(text string) ([]string, error) {
	var fields []string
	seen := map[string]bool{}
	for _, part := range strings.Split(text, ",") {
		name := strings.TrimSpace(part)
		a := s.attr(name)
		switch {
		case name == "":
			return nil, errors.New("has an empty field name")
		case a == nil || strings.Contains(a.Name, "."):
			return nil, fmt.Errorf("unknown field %q; fields are %s", name, s.names(func(a *Attribute) bool { return !strings.Contains(a.Name, ".") }))
		case !seen[a.Name]:
			seen[a.Name] = true
			fields = append(fields, a.Name)
		}
	}
	return fields, nil
}

// parseLimit reads limit: a positive integer, lowered to MaxLimit.
func (s *Schema) parseLimit(text string) (int, error) {
	if text == "" {
		return s.DefaultLimit, nil
	}
	n, err := strconv.Atoi(text)
	var numErr *strconv.NumError
	switch {
	case errors.As(err, &numErr) && errors.Is(numErr.Err, strconv.ErrRange) && !strings.HasPrefix(text, "-"):
		return s.MaxLimit, nil
	case err != nil || n < 1:
		return 0, fmt.Errorf("must be a positive whole number (at most %d rows are returned)", s.MaxLimit)
	}
	return min(n, s.MaxLimit), nil
}

// names lists the names of the attributes that keep says.
func (s *Schema) names(keep func(*Attribute) bool) string {
	var names []string
	for i := range s.Attributes {
		if keep(&s.Attributes[i]) {
			names = append(names, s.Attributes[i].Name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
