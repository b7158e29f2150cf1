package listing

import (
	"encoding/json"
	"testing"
)

func TestMeta_JSON(t *testing.T) {
	cursor, next := "abc", "def"
	tests := []struct {
		meta Meta
		want string
	}{
		{&CursorMeta{Limit: 100, Total: 0, IsLast: true},
			`{"cursor":null,"next_cursor":null,"is_last":true,"limit":100,"total_no_of_objects":0}`},
		{&CursorMeta{Cursor: &cursor, NextCursor: &next, Limit: 2, Total: 7},
			`{"cursor":"abc","next_cursor":"def","is_last":false,"limit":2,"total_no_of_objects":7}`},
		{&OffsetMeta{StartIndex: StartIndex{N: 5}, Limit: 100, Total: 9},
			`{"start_index":5,"limit":100,"total_no_of_objects":9}`},
		{&OffsetMeta{StartIndex: StartIndex{N: 0, Quoted: true}, Limit: 200, Total: 1},
			`{"start_index":"0","limit":200,"total_no_of_objects":1}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.meta)
		if err != nil || string(b) != tt.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tt.meta, b, err, tt.want)
		}
	}
}

func TestStartIndex_UnmarshalJSON(t *testing.T) {
	for in, want := range map[string]StartIndex{`7`: {N: 7}, `"7"`: {N: 7, Quoted: true}, ` "0" `: {Quoted: true}} {
		var got StartIndex
		if err := json.Unmarshal([]byte(in), &got); err != nil || got != want {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{`"7`, `x`, `"a"`, `1.5`, `null`} {
		var got StartIndex
		if err := got.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("UnmarshalJSON(%s) accepted", in)
		}
	}
}

func TestSchema_MetaLimit(t *testing.T) {
	applied := MustSchema(Schema{Name: "a", Paging: CursorPaging})
	fixed := MustSchema(Schema{Name: "b", Paging: OffsetPaging, DefaultLimit: 200, MetaLimit: MetaLimitDefault})
	if got := applied.metaLimit(10); got != 10 {
		t.Errorf("applied: %d", got)
	}
	if got := fixed.metaLimit(10); got != 200 {
		t.Errorf("default: %d", got)
	}
}
