package main

import (
	"bytes"
	"fmt"
	"math/rand"
	"regexp"
	"testing"

	"iam/api"
)

// Every operation of the document gets positive cases valid against it and
// negative ones that are not, the same ones for the same seed.
func TestCases_ValidInvalidAndDeterministic(t *testing.T) {
	doc, err := api.LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	router := mustRouter(doc)
	s := &seeded{values: map[string][]any{"user": {"5"}, "group": {"7"}, "policy": {"9"}}}
	negatives := 0
	for _, op := range operations(doc) {
		a, b := newCaseGen(op, 42, router, s), newCaseGen(op, 42, router, s)
		for range 5 {
			pa, err := a.positive()
			if err != nil {
				t.Errorf("%s: %v", op, err)
				break
			}
			pb, _ := b.positive()
			if pb == nil || !bytes.Equal(pa.body, pb.body) || pa.curl("", "") != pb.curl("", "") {
				t.Errorf("%s: the same seed made two requests:\n%s\n%s", op, pa.curl("", ""), pb.curl("", ""))
			}
			if err = a.validate(pa); err != nil {
				t.Errorf("%s: positive case invalid: %v", op, err)
			}
			neg, err := a.negative()
			_, _ = b.negative() // keeps b's random numbers in step with a's; its case is not compared
			if err != nil {
				t.Errorf("%s: %v", op, err)
			}
			if neg != nil {
				negatives++
				if a.validate(neg) == nil {
					t.Errorf("%s: negative case (%s) is valid: %s", op, neg.breach, neg.curl("", ""))
				}
			}
		}
	}
	if negatives == 0 {
		t.Error("no negative case at all")
	}
}

// The regular-expression generator writes strings the pattern matches.
func TestMatching(t *testing.T) {
	g := &gen{r: newRand(1)}
	for _, p := range []string{`^[1-9][0-9]*$`, `^[01]{168}$`, `^[A-Z]{2}$`, `^(-?[a-z_]+)(,-?[a-z_]+)*$`, `^[0-9]{1,2}$`} {
		for range 20 {
			if v, ok := g.matching(p, 0, 1000); !ok || !mustMatch(p, v) {
				t.Errorf("%s: %q (%v)", p, v, ok)
			}
		}
	}
}

func newRand(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) } //nolint:gosec // G404: reproducible values for a seed

func mustMatch(p, v string) bool { return regexp.MustCompile(p).MatchString(v) }

// Positive cases take state-dependent values from the seeded state: ids of
// the right kind (a policy's device groups are device groups, a manager is
// another user), never a made-up cursor.
func TestCases_StateValues(t *testing.T) {
	doc, err := api.LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	router := mustRouter(doc)
	s := &seeded{values: map[string][]any{"user": {"5"}, "manager": {"6"}, "group": {"7"}, "device": {"8"}, "device_group": {"9"}}}
	for _, op := range operations(doc) {
		cg := newCaseGen(op, 3, router, s)
		for range 20 {
			tc, err := cg.positive()
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			for _, kv := range tc.query {
				if kv[0] == "cursor" {
					t.Errorf("%s: a positive case sent cursor=%s", op, kv[1])
				}
			}
			for name, want := range map[string]string{"user_id": "5", "group_id": "7", "device_id": "8", "device_group_id": "9"} {
				if v, ok := tc.path[name]; ok && v != want {
					t.Errorf("%s: path %s=%s, want the seeded %s", op, name, v, want)
				}
			}
			body := tc.jsonBody()
			if op.String() == "POST /api/v1/groups" {
				if ms, ok := body["members"].([]any); ok && len(ms) > 0 && fmt.Sprint(ms[0]) != "5" {
					t.Errorf("%s: members %v, want the seeded user", op, ms)
				}
			}
			if m, ok := body["manager"]; ok && m != nil && m != "" && fmt.Sprint(m) != "6" {
				t.Errorf("%s: manager %v, want the seeded manager", op, m)
			}
		}
	}
}
