package scim

import (
	"encoding/json"
	"slices"
	"strconv"

	"iam/api/jsonout"
)

// appendJSON appends v encoded as encoding/json does (object keys sorted,
// HTML characters, U+2028, U+2029 escaped, invalid UTF-8 as U+FFFD) to
// buf. The documents this surface answers are maps, slices and scalars:
// encoding/json reaches each of their values through reflection and sorts
// each object's keys through it too, which took a sixth of a list page's
// time (100 users); this walks them directly and hands anything else to
// json.Marshal.
func appendJSON(buf []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case string:
		return jsonout.AppendString(buf, v), nil
	case bool:
		return strconv.AppendBool(buf, v), nil
	case int:
		return strconv.AppendInt(buf, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(buf, v, 10), nil
	case doc:
		if v == nil {
			return append(buf, "null"...), nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(jsonout.AppendString(buf, k), ':')
			var err error
			if buf, err = appendJSON(buf, v[k]); err != nil {
				return buf, err
			}
		}
		return append(buf, '}'), nil
	case []any:
		return appendList(buf, v)
	case []doc:
		return appendList(buf, v)
	case []string:
		return appendList(buf, v)
	}
	b, err := json.Marshal(v)
	return append(buf, b...), err
}

// appendList appends items as a JSON array (null when nil), each through
// appendJSON.
func appendList[T any](buf []byte, items []T) ([]byte, error) {
	if items == nil {
		return append(buf, "null"...), nil
	}
	buf = append(buf, '[')
	for i, e := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = appendJSON(buf, e); err != nil {
			return buf, err
		}
	}
	return append(buf, ']'), nil
}
