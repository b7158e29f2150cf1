package listing

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/uptrace/bun/dialect"
)

// maxCursorLength is the longest cursor accepted, in bytes.
const maxCursorLength = 4096

// cursorBody is what a cursor holds, as JSON under base64url: a hash of the
// list, sort and filter it was made for, and the key values (sort keys, then
// the id) of the last row of the page it follows.
type cursorBody struct {
	Hash string `json:"h"`
	Keys []any  `json:"k"`
}

// pageHash identifies the list, the order and the filter of a sequence of
// pages. The filter is hashed as its PostgreSQL rendering with arguments,
// which does not depend on how its attribute names were written.
func (s *Schema) pageHash(cols []keyColumn, filter Expr) (string, error) {
	buf := make([]byte, 0, 128)
	buf = append(append(buf, s.Name...), 0)
	for _, c := range cols {
		buf = append(append(buf, c.column...), ' ')
		buf = append(strconv.AppendBool(buf, c.desc), 0)
	}
	if filter != nil {
		where, args, err := s.Where(dialect.PG, filter)
		if err != nil {
			return "", &ParamError{Param: "filter", Detail: err.Error()}
		}
		buf = append(append(buf, where...), 0)
		for _, a := range args {
			buf = fmt.Appendf(buf, "%T %v\x00", a, a)
		}
	}
	sum := sha256.Sum256(buf)
	return base64.RawURLEncoding.EncodeToString(sum[:9]), nil
}

// encodeCursor makes the cursor of the page after the row with key values vals.
func encodeCursor(hash string, vals []any) (string, error) {
	keys := make([]any, len(vals))
	for i, v := range vals {
		if t, ok := v.(time.Time); ok {
			v = t.UTC().Format(time.RFC3339Nano)
		}
		keys[i] = v
	}
	b, err := json.Marshal(cursorBody{Hash: hash, Keys: keys})
	if err != nil {
		return "", fmt.Errorf("listing: encode cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// decodeCursor checks that a cursor was made for s with p's sort and filter
// and returns its key values, typed for keysetWhere. Errors are *ParamError.
func (s *Schema) decodeCursor(text string, p Params) ([]any, error) {
	cols, err := s.keyColumns(p.Sort)
	if err != nil {
		return nil, err
	}
	hash, err := s.pageHash(cols, p.Filter)
	if err != nil {
		return nil, err
	}
	return readCursor(text, cols, hash)
}

// readCursor checks that a cursor was made for the pages of hash and
// returns its key values, typed for the columns cols.
func readCursor(text string, cols []keyColumn, hash string) ([]any, error) {
	malformed := &ParamError{Param: "cursor", Detail: "is not a cursor of this list; use the next_cursor of a page"}
	if len(text) > maxCursorLength {
		return nil, malformed
	}
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		return nil, malformed
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var body cursorBody
	if err := dec.Decode(&body); err != nil {
		return nil, malformed
	}
	if body.Hash != hash {
		return nil, &ParamError{Param: "cursor", Detail: "was made for a different filter or sort; ask for the first page again"}
	}
	if len(body.Keys) != len(cols) {
		return nil, malformed
	}
	vals := make([]any, len(cols))
	for i, c := range cols {
		v, ok := cursorValue(c.typ, body.Keys[i])
		if !ok {
			return nil, malformed
		}
		vals[i] = v
	}
	return vals, nil
}

// cursorValue converts a decoded JSON key value to the type of its column.
func cursorValue(t Type, raw any) (any, bool) {
	switch v := raw.(type) {
	case string:
		switch t {
		case TypeString:
			return v, true
		case TypeTime:
			tm, err := time.Parse(time.RFC3339Nano, v)
			return tm.UTC(), err == nil
		}
	case json.Number:
		if t == TypeInteger || t == TypeID {
			n, err := strconv.ParseInt(v.String(), 10, 64)
			return n, err == nil
		}
	case bool:
		return v, t == TypeBoolean
	}
	return nil, false
}
