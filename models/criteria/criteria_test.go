package criteria_test

import (
	"errors"
	"strings"
	"testing"

	"iam/models/criteria"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1", "1"},
		{" 1 and 2 ", "1 and 2"},
		{"1 AND 2 Or 3", "(1 and 2) or 3"},
		{"1 or 2 and 3", "1 or (2 and 3)"},
		{"(1 or 2) and 3", "(1 or 2) and 3"},
		{"((1))", "1"},
		{"1 and (2 or (3 and 4))", "1 and (2 or (3 and 4))"},
		{"(1)and(2)", "1 and 2"},
		{"1 and 2 and 3", "1 and 2 and 3"},
	} {
		e, err := criteria.Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := e.String(); got != tc.want {
			t.Errorf("Parse(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParse_Errors(t *testing.T) {
	for _, tc := range []struct {
		in  string
		pos int
		msg string
	}{
		{"", 1, "empty"},
		{"   ", 1, "empty"},
		{"1 and", 6, "expected a sequence number"},
		{"1 2", 3, "expected \"and\""},
		{"(1 or 2", 8, `or ")"`},
		{"1)", 2, "found \")\""},
		{"0", 1, "not a sequence number"},
		{"01", 1, "not a sequence number"},
		{"1001", 1, "not a sequence number"},
		{"99999999999999999999999", 1, "not a sequence number"},
		{"1 xor 2", 3, "unknown word"},
		{"1 and 2a", 7, "not a sequence number"},
		{"1 & 2", 3, "unexpected character"},
		{"not 1", 1, "unknown word"},
		{strings.Repeat("(", 33) + "1" + strings.Repeat(")", 33), 33, "nested"},
		{strings.Repeat("1 or ", 250) + "1", criteria.MaxLength + 1, "longer"},
	} {
		_, err := criteria.Parse(tc.in)
		var pe *criteria.Error
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, want *Error", tc.in, err)
			continue
		}
		if pe.Pos != tc.pos || !strings.Contains(pe.Msg, tc.msg) {
			t.Errorf("Parse(%q) = %v, want position %d and %q", tc.in, pe, tc.pos, tc.msg)
		}
	}
	// 32 levels are allowed.
	if _, err := criteria.Parse(strings.Repeat("(", 32) + "1" + strings.Repeat(")", 32)); err != nil {
		t.Error(err)
	}
}

func TestEval(t *testing.T) {
	e, err := criteria.Parse("1 and (2 or 3)")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		true []int
		want bool
	}{
		{nil, false}, {[]int{1}, false}, {[]int{1, 2}, true}, {[]int{1, 3}, true}, {[]int{2, 3}, false}, {[]int{1, 2, 3}, true},
	} {
		set := map[int]bool{}
		for _, n := range tc.true {
			set[n] = true
		}
		if got := e.Eval(func(n int) bool { return set[n] }); got != tc.want {
			t.Errorf("with %v true: %v, want %v", tc.true, got, tc.want)
		}
	}
	if got := criteria.Refs(e); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("Refs = %v", got)
	}
	// Short-circuit: or stops at the first true term.
	calls := 0
	or, _ := criteria.Parse("1 or 2")
	or.Eval(func(int) bool { calls++; return true })
	if calls != 1 {
		t.Errorf("or evaluated %d terms, want 1", calls)
	}
}

// FuzzParse checks that no input panics, that errors are *Error with a
// position inside the input (or just after it), and that the canonical form
// of a parsed expression parses to the same canonical form and evaluates
// the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "1 and 2", "(1 or 2) and 3", "1 or (2 and (3 or 4))", "((", "1 and", "AND", "9 Or 8", "1\tand\n2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := criteria.Parse(src)
		if err != nil {
			var pe *criteria.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q): %T %v", src, err, err)
			}
			if pe.Pos < 1 || pe.Pos > len(src)+1 && len(src) <= criteria.MaxLength {
				t.Fatalf("Parse(%q): position %d out of range", src, pe.Pos)
			}
			return
		}
		canon := e.String()
		again, err := criteria.Parse(canon)
		if err != nil {
			t.Fatalf("canonical %q of %q: %v", canon, src, err)
		}
		if again.String() != canon {
			t.Fatalf("canonical %q reparsed as %q", canon, again.String())
		}
		refs := criteria.Refs(e)
		for mask := 0; mask < 8; mask++ {
			holds := func(n int) bool {
				for i, r := range refs {
					if r == n {
						return mask>>(i%3)&1 == 1
					}
				}
				return false
			}
			if e.Eval(holds) != again.Eval(holds) {
				t.Fatalf("%q and %q evaluate differently", src, canon)
			}
		}
	})
}
