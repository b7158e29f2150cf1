package main

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"testing"

	"iam/models/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The benchmark runs both shapes, the instant server and the 20 ms relay,
// on both databases, and prints each path's rate (a small run: this checks
// it works, not the figures). NOTIFYBENCH_FULL=1 runs the default sizes and
// logs the figures.
func TestNotifyBench_PrintsBothShapes(t *testing.T) {
	args := []string{"-n", "60", "-relay-n", "40", "-rounds", "1"}
	if os.Getenv("NOTIFYBENCH_FULL") != "" {
		args = []string{"-n", "2000"}
	}
	for _, db := range []string{"SQLite", "PostgreSQL"} {
		t.Run(db, func(t *testing.T) {
			a := args
			if db == "PostgreSQL" {
				a = append([]string{"-db", dbtest.PostgresURL(t)}, args...)
			}
			var out bytes.Buffer
			if err := run(&out, a); err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + out.String())
			shapes := regexp.MustCompile(`(?m)^\d+ recipients.*(accepts at once|takes 20ms per message)`).FindAllStringSubmatch(out.String(), -1)
			if len(shapes) != 2 || shapes[0][1] != "accepts at once" || shapes[1][1] != "takes 20ms per message" {
				t.Errorf("shapes %v", shapes)
			}
			rates := regexp.MustCompile(`(?m)^  (go-mail plain loop|notify SMTP path|delivery path) \(.*\)?: +(\d+) msg/s`).FindAllStringSubmatch(out.String(), -1)
			if len(rates) != 6 {
				t.Fatalf("%d rates printed, want 3 per shape:\n%s", len(rates), out.String())
			}
			for _, r := range rates {
				if v, _ := strconv.Atoi(r[2]); v <= 0 {
					t.Errorf("%s: %s msg/s", r[1], r[2])
				}
			}
			if !regexp.MustCompile(`delivery path \(SMTP path \+ ` + db + ` delivery ledger`).MatchString(out.String()) {
				t.Errorf("the delivery path did not run on %s", db)
			}
		})
	}
}
