package jsonout

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAppendString_MatchesEncodingJSON puts every byte that needs
// care at every position of strings up to 20 bytes long.
func TestAppendString_MatchesEncodingJSON(t *testing.T) {
	var specials []string
	for c := range 0x80 {
		if c < 0x20 || strings.ContainsRune("\"\\<>&\x7f", rune(c)) {
			specials = append(specials, string(rune(c)))
		}
	}
	specials = append(specials, "\xff", "\xc3", "é", "\u2028", "\u2029", "😀", "\xed\xa0\x80")
	for n := range 21 {
		for pos := range n + 1 {
			for _, sp := range specials {
				s := strings.Repeat("a", pos) + sp + strings.Repeat("b", n-pos)
				want, _ := json.Marshal(s)
				if got := AppendString(nil, s); string(got) != string(want) {
					t.Fatalf("%q: got %s, want %s", s, got, want)
				}
			}
		}
		s := strings.Repeat("x", n)
		if got := AppendString(nil, s); string(got) != `"`+s+`"` {
			t.Fatalf("%q: got %s", s, got)
		}
	}
}

// FuzzAppendString: any string is escaped as encoding/json escapes it.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted" \ back`, "<a href='x'>&amp;</a>", "\x00\x01\x1f\x7f\t\n\r\b\f",
		"é日本\u2028\u2029", "bad \xff\xfe utf-8 \xed\xa0\x80", "Ünïcödé@example.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}
