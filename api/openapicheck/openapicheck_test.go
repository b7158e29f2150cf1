package openapicheck

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

const testDoc = `
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /x:
    get:
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {type: object, required: [a], properties: {a: {type: string}}}
components:
  schemas:
    Error:
      type: object
      required: [error]
      properties:
        error: {type: object, required: [code], properties: {code: {type: string}}}
`

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func TestChecker(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData([]byte(testDoc))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(doc)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(method, path string, status int, body string) (*http.Request, *http.Response, []byte) {
		req, _ := http.NewRequest(method, "http://h"+path, nil)
		resp := &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}}}
		return req, resp, []byte(body)
	}
	cases := []struct {
		name           string
		method, path   string
		status         int
		body           string
		strict, failed bool
	}{
		{"documented", "GET", "/x", 200, `{"a":"b"}`, true, false},
		{"wrong shape", "GET", "/x", 200, `{"a":1}`, true, true},
		{"undocumented status", "GET", "/x", 500, `{"error":{"code":"1"}}`, true, true},
		{"unknown route", "GET", "/y", 404, `{"error":{"code":"1"}}`, true, true},
		{"unknown route, error body", "GET", "/y", 404, `{"error":{"code":"1"}}`, false, false},
		{"unknown route, not an error body", "GET", "/y", 404, `{"oops":1}`, false, true},
		{"wrong method, error body", "PUT", "/x", 405, `{"error":{"code":"1"}}`, false, false},
		{"documented route, lenient, wrong shape", "GET", "/x", 200, `{}`, false, true},
	}
	for _, tc := range cases {
		r := &recorder{TB: t}
		req, resp, body := answer(tc.method, tc.path, tc.status, tc.body) //nolint:bodyclose // a response made in the test, with no body
		if tc.strict {
			c.Check(r, req, resp, body)
		} else {
			c.CheckRouteOrError(r, req, resp, body, "Error")
		}
		if failed := len(r.failures) > 0; failed != tc.failed {
			t.Errorf("%s: failed %v, want %v (%s)", tc.name, failed, tc.failed, strings.Join(r.failures, "; "))
		}
	}
}
