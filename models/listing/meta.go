package listing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Meta is the meta object of a list response: *CursorMeta or *OffsetMeta.
type Meta interface{ isMeta() }

// CursorMeta is the meta of a cursor-paged list (spec 4.0 item 4).
type CursorMeta struct {
	// Cursor is the cursor this page was asked with; nil on the first page.
	Cursor *string `json:"cursor"`
	// NextCursor fetches the page after this one; nil on the last page.
	NextCursor *string `json:"next_cursor"`
	// IsLast tells whether this is the last page.
	IsLast bool `json:"is_last"`
	// Limit is the page size (see MetaLimit).
	Limit int `json:"limit"`
	// Total counts the rows that match the filter, on every page.
	Total int64 `json:"total_no_of_objects"`
}

// OffsetMeta is the meta of an offset-paged list (spec 4.0 item 4).
type OffsetMeta struct {
	// StartIndex is the index of the page's first row, the from asked for.
	StartIndex StartIndex `json:"start_index"`
	// Limit is the page size (see MetaLimit).
	Limit int `json:"limit"`
	// Total counts the rows that match the filter.
	Total int64 `json:"total_no_of_objects"`
}

func (*CursorMeta) isMeta() {}
func (*OffsetMeta) isMeta() {}

// StartIndex is a start index written as a JSON number (0) or, when Quoted,
// as a JSON string ("0"), as management and job lists write it.
type StartIndex struct {
	N      int
	Quoted bool
}

// MarshalJSON writes N, quoted when Quoted is set.
func (s StartIndex) MarshalJSON() ([]byte, error) {
	n := strconv.Itoa(s.N)
	if s.Quoted {
		return []byte(`"` + n + `"`), nil
	}
	return []byte(n), nil
}

// UnmarshalJSON reads either form and sets Quoted by which it was.
func (s *StartIndex) UnmarshalJSON(b []byte) error {
	text, quoted := bytes.CutPrefix(bytes.TrimSpace(b), []byte(`"`))
	if quoted {
		text, quoted = bytes.CutSuffix(text, []byte(`"`))
		if !quoted {
			return fmt.Errorf("start_index: unterminated string %s", b)
		}
	}
	n, err := strconv.Atoi(string(text))
	if err != nil {
		return fmt.Errorf("start_index: %s is not an integer", b)
	}
	*s = StartIndex{N: n, Quoted: quoted}
	return nil
}

// metaLimit is the limit meta reports for a page fetched with limit.
func (s *Schema) metaLimit(limit int) int {
	if s.MetaLimit == MetaLimitDefault {
		return s.DefaultLimit
	}
	return limit
}

var (
	_ json.Marshaler   = StartIndex{}
	_ json.Unmarshaler = (*StartIndex)(nil)
)
