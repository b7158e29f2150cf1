package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The configuration reference names every variable the binary reads, and
// only those: a variable added to Config without a line in
// docs/configuration.md, or a line left behind for a variable gone, fails.
func TestDocs_ConfigurationListsEveryVariable(t *testing.T) {
	known, err := configVariables()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, key := range known {
		if !strings.Contains(text, "`"+key+"`") {
			t.Errorf("docs/configuration.md does not list %s, which the binary reads", key)
		}
	}
	for _, named := range regexp.MustCompile("`(IAM_[A-Z0-9_]+)`").FindAllStringSubmatch(text, -1) {
		if !slices.Contains(known, named[1]) {
			t.Errorf("docs/configuration.md lists %s, which the binary does not read", named[1])
		}
	}
}

// The README stays what a newcomer reads first: short, with its two commands,
// and every document it links to exists.
func TestDocs_ReadmeIsShortAndItsLinksResolve(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	if n := strings.Count(text, "\n"); n > 200 {
		t.Errorf("README.md has %d lines; reference belongs in docs/", n)
	}
	for _, cmd := range []string{"go run ./cmd/iam dev", "go test -count=1 ./..."} {
		if !strings.Contains(text, cmd) {
			t.Errorf("README.md lacks its command %q", cmd)
		}
	}
	for _, link := range regexp.MustCompile(`\]\((docs/[^)#]+)`).FindAllStringSubmatch(text, -1) {
		if _, err := os.Stat("../../" + link[1]); err != nil { //nolint:gosec // a link of the repository's own README
			t.Errorf("README.md links to %s: %v", link[1], err)
		}
	}
}
