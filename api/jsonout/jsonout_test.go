package jsonout

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
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

// TestAppendTimeUTC_MatchesEncodingJSON compares with encoding/json's
// writing of t.UTC(): fractions of every length, zones other than UTC,
// the ends of the year range and beyond them.
func TestAppendTimeUTC_MatchesEncodingJSON(t *testing.T) {
	east := time.FixedZone("east", 5*3600+30*60)
	times := []time.Time{
		time.Time{},
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 8, 0, 4, 5, 0, east),
		time.Unix(0, 0),
	}
	for ns := 1; ns < 1e9; ns *= 10 {
		times = append(times, time.Date(2026, 2, 3, 4, 5, 6, ns, time.UTC), time.Date(2026, 2, 3, 4, 5, 6, ns*7+123, east))
	}
	rng := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // G404: reproducible test times, not a secret
	for range 10000 {
		times = append(times, time.Unix(rng.Int64N(253402300800), rng.Int64N(1e9)).In(east))
	}
	for _, tm := range times {
		want, err := json.Marshal(tm.UTC())
		if err != nil { // out of encoding/json's range: AppendFormat's text
			want = []byte(`"` + tm.UTC().Format(time.RFC3339Nano) + `"`)
		}
		if got := AppendTimeUTC(nil, tm); string(got) != string(want) {
			t.Fatalf("%v: got %s, want %s", tm, got, want)
		}
	}
}
