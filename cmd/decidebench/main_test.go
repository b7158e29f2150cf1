package main

import (
	"bytes"
	"regexp"
	"testing"

	"iam/models/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The benchmark seeds its organization, times decisions in process for both
// shapes and compares the two routes over HTTP (a short run: this checks it
// works, not the figures).
func TestDecideBench_PrintsFigures(t *testing.T) {
	dsn := dbtest.PostgresURL(t)
	var out bytes.Buffer
	err := run(t.Context(), []string{"-decisions", "200", "-duration", "600ms", "-turns", "1", "-concurrency", "4"},
		func(k string) string {
			if k == "IAM_BENCH_DATABASE_URL" {
				return dsn
			}
			return ""
		}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if n := len(regexp.MustCompile(`(?m)^  .*: 200 decisions, .* p99 .*decisions/s`).FindAllString(out.String(), -1)); n != 2 {
		t.Errorf("%d in-process lines, want 2", n)
	}
	if n := len(regexp.MustCompile(`(?m)^    with the answer written \(\d+ bytes .*\): p50 .* p99 `).FindAllString(out.String(), -1)); n != 2 {
		t.Errorf("%d lines with the answer written, want 2", n)
	}
	if !regexp.MustCompile(`(?m)^  evaluate at \d+% of GET /users\?limit=1`).MatchString(out.String()) {
		t.Error("no HTTP ratio")
	}
}
