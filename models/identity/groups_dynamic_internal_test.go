package identity

import (
	"fmt"
	"testing"
)

// TestParseRule_CacheIsBounded: parsing many distinct rules (rule text comes
// from requests) keeps at most ruleCacheSize of them, and a rule dropped from
// the cache still parses.
func TestParseRule_CacheIsBounded(t *testing.T) {
	first := `department eq "D-0"`
	for i := range ruleCacheSize * 3 {
		if _, err := ParseMembershipRule(fmt.Sprintf(`department eq "D-%d"`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := ruleCache.Len(); n > ruleCacheSize {
		t.Fatalf("the rule cache holds %d rules, over its bound %d", n, ruleCacheSize)
	}
	if _, ok := ruleCache.Get(first); ok {
		t.Error("the least recently used rule should have been dropped")
	}
	if got, err := ParseMembershipRule(first); err != nil || got != first {
		t.Errorf("a dropped rule parses again: %q, %v", got, err)
	}
}
