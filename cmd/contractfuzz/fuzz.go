package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"iam/api/openapicheck"
)

type fuzzer struct {
	opts    options
	base    string
	checker *openapicheck.Checker
	seeded  *seeded
	router  routers.Router
	client  http.Client

	sent     map[string]int // cases by kind
	failures []*failure
	notes    []string // operations the generator could not serve
}

// failure is one broken check, with the first request that broke it and
// how many did.
type failure struct {
	op, check, reason, request, answer string
	sig                                string // what tells failures of one check apart
	status, count                      int
}

func mustRouter(doc *openapi3.T) routers.Router {
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		panic(err)
	}
	return r
}

// fuzz runs the cases of every operation and prints the failures; it
// returns how many cases failed.
func (f *fuzzer) fuzz(ops []*operation) int {
	f.sent = map[string]int{}
	began := time.Now()
	deadline := began.Add(f.opts.duration)
	for i, op := range ops {
		// Each operation gets an equal share of the time left.
		share := time.Until(deadline) / time.Duration(len(ops)-i)
		f.operation(op, time.Now().Add(share))
	}
	total := 0
	for _, fl := range f.failures {
		total += fl.count
	}
	for _, n := range f.notes {
		fmt.Println("note:", n)
	}
	for _, fl := range f.failures {
		fmt.Printf("\nFAIL %s: %s (%d cases)\n  %s\n  request: %s\n  answer:  %d %s\n",
			fl.op, fl.check, fl.count, fl.reason, fl.request, fl.status, fl.answer)
	}
	fmt.Printf("\ncontractfuzz: seed %d, %d operations, %d cases (%d positive, %d negative, %d without credentials) in %s: %d failed, %d distinct failures\n",
		f.opts.seed, len(ops), f.sent[positive]+f.sent[negative]+f.sent[noAuth], f.sent[positive], f.sent[negative], f.sent[noAuth],
		time.Since(began).Round(time.Second), total, len(f.failures))
	return total
}

func (f *fuzzer) operation(op *operation, until time.Time) {
	cg := newCaseGen(op, f.opts.seed, f.router, f.seeded)
	if op.auth != "" && !op.anonymous {
		if tc, err := cg.positive(); err == nil {
			tc.kind = noAuth
			f.send(tc)
		}
	}
	noNegatives := false
	for i := 0; i < f.opts.cases && time.Now().Before(until); i++ {
		var tc *testCase
		var err error
		if i%2 == 1 && !noNegatives {
			if tc, err = cg.negative(); err == nil && tc == nil {
				noNegatives = true // nothing to break: positives only
				continue
			}
		} else {
			tc, err = cg.positive()
		}
		if err != nil {
			f.notes = append(f.notes, err.Error())
			return
		}
		f.send(tc)
	}
}

// credentials of an operation.
func (f *fuzzer) credentials(op *operation) string {
	switch op.auth {
	case "serviceOAuthToken":
		return "Service-oauthtoken " + f.seeded.token
	case "deviceCredential":
		return f.seeded.device
	}
	return ""
}

func (f *fuzzer) send(tc *testCase) {
	f.sent[tc.kind]++
	auth := f.credentials(tc.op)
	if tc.kind == noAuth {
		auth = ""
	}
	req, err := tc.request(f.base, auth)
	if err != nil {
		f.fail(tc, "request", err.Error(), 0, "")
		return
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.fail(tc, "transport", err.Error(), 0, "")
		return
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close() // read to the end: a failed close loses nothing
	answer := fmt.Sprintf("%s %s", resp.Header.Get("Content-Type"), truncate(string(body), 400))
	if f.opts.verbose {
		fmt.Printf("%s %s [%s] → %d\n", tc.op, tc.kind, tc.breach, resp.StatusCode)
	}
	check := func(name, reason string) { f.fail(tc, name, reason, resp.StatusCode, answer) }

	if resp.StatusCode >= 500 {
		check("server error", "a 5xx answer")
	}
	// The request as sent, for the contract check (its body was read).
	sent, _ := tc.request(f.base, auth)
	if err := f.checker.Validate(sent, resp, body); err != nil {
		check("response off the contract", firstLine(err.Error()))
	}
	if expected(tc, resp, body) {
		return
	}
	switch tc.kind {
	case positive:
		if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnprocessableEntity {
			check("valid request refused", "a request valid against the document answered "+resp.Status)
		}
	case negative:
		if resp.StatusCode < 300 {
			check("invalid request accepted", "the request breaks the document ("+tc.breach+") and answered "+resp.Status)
		}
	case noAuth:
		if resp.StatusCode != http.StatusUnauthorized {
			check("authentication ignored", "no credentials answered "+resp.Status+", want 401")
		}
	}
}

// expected reports the documented exceptions: a rate limit (429), and an
// Idempotency-Key sent again with another request (422 00000115).
func expected(tc *testCase, resp *http.Response, body []byte) bool {
	if resp.StatusCode == http.StatusTooManyRequests {
		return true
	}
	if resp.StatusCode == http.StatusUnprocessableEntity && tc.header.Get("Idempotency-Key") != "" {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		return json.Unmarshal(body, &e) == nil && e.Error.Code == "00000115"
	}
	return false
}

// fail records a broken check; failures of one operation, check and status
// count as one, reported with the first request.
func (f *fuzzer) fail(tc *testCase, check, reason string, status int, answer string) {
	sig := signature(tc, answer)
	for _, fl := range f.failures {
		if fl.op == tc.op.String() && fl.check == check && fl.status == status && fl.sig == sig {
			fl.count++
			return
		}
	}
	if tc.kind == negative {
		reason += " [negative: " + tc.breach + "]"
	}
	f.failures = append(f.failures, &failure{op: tc.op.String(), check: check, sig: sig, reason: reason, status: status,
		answer: answer, count: 1, request: tc.curl(f.base, redact(f.credentials(tc.op), tc.kind))})
}

// signature tells apart failures of one operation, check and status: a
// negative case by the rule it breaks (its value aside), another by the
// field or parameter its error names.
func signature(tc *testCase, answer string) string {
	if tc.kind == negative {
		where, why, _ := strings.Cut(tc.breach, "=")
		if _, rule, ok := strings.Cut(why, ": "); ok {
			return where + ": " + rule
		}
		return tc.breach
	}
	if _, detail, ok := strings.Cut(answer, `"detail":"`); ok {
		field, _, _ := strings.Cut(detail, ":")
		return unknownProperty.ReplaceAllString(index.ReplaceAllString(truncate(field, 60), "[N]"), "x_…")
	}
	return ""
}

var (
	index           = regexp.MustCompile(`\[[0-9]+\]`)
	unknownProperty = regexp.MustCompile(`x_[a-z0-9]+`) // the names gen gives properties no schema declares
)

// redact shows which credentials a request had without the secret.
func redact(auth, kind string) string {
	if kind == noAuth || auth == "" {
		return ""
	}
	scheme, _, _ := strings.Cut(auth, " ")
	return scheme + " …"
}

func firstLine(s string) string {
	if len(s) > 1500 {
		s = s[:1500] + "…"
	}
	return s
}
