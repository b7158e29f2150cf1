package main

import (
	"bytes"
	"regexp"
	"testing"
)

// The benchmark runs its three shapes and prints each one's figures (a
// small run on SQLite: this checks it works, not the figures).
func TestHookBench_PrintsEveryShape(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server and a worker: not in -short")
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-only", "sqlite", "-n", "60", "-rate", "100", "-slow-n", "20"}, func(string) string { return "" }, &out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if n := len(regexp.MustCompile(`(?m)deliveries/s; commit to first attempt p50 \S+, p99 \S+`).FindAllString(out.String(), -1)); n != 3 {
		t.Fatalf("%d shapes printed their figures, want 3", n)
	}
}
