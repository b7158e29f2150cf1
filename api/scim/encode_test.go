package scim

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// TestAppendJSON: the answers' encoder writes what encoding/json writes,
// byte for byte, for the documents the surface builds (nested maps and
// slices, nil ones, numbers, times through json.Marshal) and for strings
// that need escaping.
func TestAppendJSON(t *testing.T) {
	var nilDoc doc
	var nilList []any
	for _, v := range []any{
		nil, "", true, false, 0, -7, int64(math.MinInt64), 1.5, math.MaxFloat64, json.Number("12"),
		doc{"b": 1, "a": []any{doc{"value": "x", "primary": true}, "y", nil}, "Z": doc{}, "n": nilDoc, "l": nilList},
		[]doc{{"id": "1"}, nil}, []string{"a", "<b>"}, []string(nil), []doc(nil),
		doc{"meta": doc{"created": time.Date(2026, 12, 7, 7, 0, 0, 5, time.UTC), "version": `W/"abc"`}},
		map[string]string{"k": "v"}, struct{ A int }{A: 1},
	} {
		want, wantErr := json.Marshal(v)
		got, err := appendJSON(nil, v)
		if string(got) != string(want) || (err == nil) != (wantErr == nil) {
			t.Errorf("%#v: got %s (%v), want %s (%v)", v, got, err, want, wantErr)
		}
	}
	if _, err := appendJSON(nil, doc{"x": math.NaN()}); err == nil {
		t.Error("NaN encoded without an error")
	}
}
