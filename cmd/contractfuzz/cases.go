package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"mime/multipart"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// operation is one method of one path of the document.
type operation struct {
	method, path string
	op           *openapi3.Operation
	params       openapi3.Parameters // the path item's and the operation's
	auth         string              // "", "serviceOAuthToken" or "deviceCredential"
	anonymous    bool                // auth is optional
}

func (o *operation) String() string { return o.method + " " + o.path }

// operations lists the document's operations: DELETEs last (they remove the
// seeded resources the others use), then by path.
func operations(doc *openapi3.T) []*operation {
	var out []*operation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			o := &operation{method: method, path: path, op: op}
			seen := map[string]bool{}
			for _, p := range op.Parameters {
				seen[p.Value.In+" "+p.Value.Name] = true
				o.params = append(o.params, p)
			}
			for _, p := range item.Parameters {
				if !seen[p.Value.In+" "+p.Value.Name] {
					o.params = append(o.params, p)
				}
			}
			sec := doc.Security
			if op.Security != nil {
				sec = *op.Security
			}
			for _, req := range sec {
				if len(req) == 0 {
					o.anonymous = true // credentials optional ({} among the requirements)
				}
				for name := range req {
					o.auth = name
				}
			}
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.method == "DELETE") != (b.method == "DELETE") {
			return b.method == "DELETE"
		}
		if a.path != b.path {
			return a.path < b.path
		}
		return a.method < b.method
	})
	return out
}

// kind of a case.
const (
	positive = "positive" // valid against the document: must not be refused as invalid
	negative = "negative" // one rule broken: must not be accepted
	noAuth   = "no auth"  // no credentials: must be 401
)

// testCase is one request to send and what it is.
type testCase struct {
	op     *operation
	kind   string
	breach string // for a negative case: what it breaks
	path   map[string]string
	query  [][2]string
	header http.Header
	ctype  string
	body   []byte
}

// caseGen makes the cases of one operation.
type caseGen struct {
	g      *gen
	op     *operation
	router routers.Router
	seed   *seeded
}

func newCaseGen(op *operation, seed int64, router routers.Router, s *seeded) *caseGen {
	h := int64(0)
	for _, c := range op.String() {
		h = h*31 + int64(c)
	}
	r := rand.New(rand.NewSource(seed ^ h)) //nolint:gosec // G404: the cases must be reproducible from the seed
	hint := func(name string) []any {
		if kind, ok := opKinds[op.String()][name]; ok {
			return s.values[kind]
		}
		return s.hint(name)
	}
	return &caseGen{g: &gen{r: r, hint: hint}, op: op, router: router, seed: s}
}

// positive returns a request valid against the document, or an error when
// none was made in a few tries.
func (c *caseGen) positive() (*testCase, error) {
	var last error
	for range 10 {
		tc, err := c.build()
		if err == nil {
			err = c.validate(tc)
		}
		if err == nil && !c.seed.protects(tc) {
			return tc, nil
		}
		last = err
	}
	if last == nil { // the last try was valid but would touch the fuzzer's admin
		return nil, fmt.Errorf("%s: no valid request in 10 tries", c.op)
	}
	return nil, fmt.Errorf("%s: no valid request in 10 tries: %w", c.op, last)
}

// negative returns a request that breaks one rule of the document, or nil
// when the operation has no rule to break.
func (c *caseGen) negative() (*testCase, error) {
	for range 10 {
		tc, err := c.positive()
		if err != nil {
			return nil, err
		}
		var options []func() (*testCase, string)
		for _, p := range c.op.params {
			p := p.Value
			if p.In == "header" && p.Name == "Idempotency-Key" {
				continue
			}
			options = append(options, c.paramBreaches(tc, p)...)
		}
		options = append(options, c.bodyBreaches(tc)...)
		if len(options) == 0 {
			return nil, nil
		}
		c.g.r.Shuffle(len(options), func(i, j int) { options[i], options[j] = options[j], options[i] })
		for _, o := range options {
			neg, why := o()
			neg.kind, neg.breach = negative, why
			if c.validate(neg) != nil && !c.seed.protects(neg) {
				return neg, nil
			}
		}
	}
	return nil, nil
}

func (c *caseGen) build() (*testCase, error) {
	tc := &testCase{op: c.op, kind: positive, path: map[string]string{}, header: http.Header{}}
	for _, ref := range c.op.params {
		p := ref.Value
		// A cursor is only valid as a page gave it: never a made-up one.
		if p.In == "query" && p.Name == "cursor" || !p.Required && !c.g.chance(0.5) {
			continue
		}
		v, err := c.g.value(p.Schema.Value, p.Name)
		if err != nil {
			return nil, err
		}
		s := paramText(v)
		switch p.In {
		case "path":
			if s == "" || strings.ContainsAny(s, "/?#") {
				return nil, fmt.Errorf("path parameter %s %q cannot be sent", p.Name, s)
			}
			tc.path[p.Name] = s
		case "query":
			tc.query = append(tc.query, [2]string{p.Name, s})
		case "header":
			tc.header.Set(p.Name, s)
		}
	}
	if rb := c.op.op.RequestBody; rb != nil && (rb.Value.Required || c.g.chance(0.8)) {
		ctype := sortedKeys(rb.Value.Content)[c.g.r.Intn(len(rb.Value.Content))]
		mt := rb.Value.Content[ctype]
		if mt.Schema == nil {
			return tc, nil
		}
		v, err := c.g.value(mt.Schema.Value, "")
		if err != nil {
			return nil, err
		}
		if err := tc.setBody(ctype, mt, v); err != nil {
			return nil, err
		}
	}
	return tc, c.stateful(tc)
}

// paramText is a parameter's value as sent: arrays comma-separated (the
// document's query arrays are form style, explode false).
func paramText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = paramText(e)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

func (tc *testCase) setBody(ctype string, mt *openapi3.MediaType, v any) error {
	tc.ctype = ctype
	switch {
	case strings.HasPrefix(ctype, "multipart/form-data"):
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("a multipart body of %T", v)
		}
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		_ = w.SetBoundary("contractfuzz-boundary") // the same request for the same seed
		for _, k := range sortedKeys(obj) {
			if ps := mt.Schema.Value.Properties[k]; ps != nil && ps.Value.Format == "binary" {
				fw, err := w.CreateFormFile(k, k+".csv")
				if err != nil {
					return err
				}
				if _, err := fmt.Fprint(fw, paramText(obj[k])); err != nil {
					return err
				}
				continue
			}
			_ = w.WriteField(k, paramText(obj[k]))
		}
		if err := w.Close(); err != nil {
			return err
		}
		tc.ctype, tc.body = w.FormDataContentType(), b.Bytes()
	case ctype == "application/x-www-form-urlencoded":
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("a form body of %T", v)
		}
		form := url.Values{}
		for _, k := range sortedKeys(obj) {
			form.Set(k, paramText(obj[k]))
		}
		tc.body = []byte(form.Encode())
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		tc.body = b
	}
	return nil
}

// paramBreaches are the ways to break one parameter of tc.
func (c *caseGen) paramBreaches(tc *testCase, p *openapi3.Parameter) []func() (*testCase, string) {
	var out []func() (*testCase, string)
	if p.Required && p.In != "path" {
		out = append(out, func() (*testCase, string) {
			neg := tc.clone()
			neg.setParam(p, nil)
			return neg, fmt.Sprintf("required %s parameter %s left out", p.In, p.Name)
		})
	}
	v, err := c.g.value(p.Schema.Value, p.Name)
	if err != nil {
		return out
	}
	for _, b := range breaches(p.Schema.Value, normalize(v)) {
		s := paramText(b.value)
		if _, isStr := b.value.(string); !isStr && typeOf(p.Schema.Value) == "string" {
			continue // every parameter is text: a number is a string too
		}
		if p.In == "path" && (s == "" || strings.ContainsAny(s, "/?#")) {
			continue
		}
		why := b.why
		if b.value == nil {
			why = "an empty value"
		}
		out = append(out, func() (*testCase, string) {
			neg := tc.clone()
			neg.setParam(p, &s)
			return neg, fmt.Sprintf("%s parameter %s=%q: %s", p.In, p.Name, s, why)
		})
	}
	return out
}

// bodyBreaches are the ways to break one rule of tc's JSON body.
func (c *caseGen) bodyBreaches(tc *testCase) []func() (*testCase, string) {
	rb := c.op.op.RequestBody
	if rb == nil || tc.ctype != "application/json" {
		return nil
	}
	var v any
	if err := json.Unmarshal(tc.body, &v); err != nil {
		return nil
	}
	mt := rb.Value.Content["application/json"]
	var out []func() (*testCase, string)
	for _, b := range breaches(mt.Schema.Value, v) {
		out = append(out, func() (*testCase, string) {
			neg := tc.clone()
			neg.body, _ = json.Marshal(b.value)
			return neg, fmt.Sprintf("body %s: %s", b.where, b.why)
		})
	}
	return out
}

func (tc *testCase) clone() *testCase {
	cp := *tc
	cp.path = map[string]string{}
	for k, v := range tc.path {
		cp.path[k] = v
	}
	cp.query = append([][2]string(nil), tc.query...)
	cp.header = tc.header.Clone()
	return &cp
}

// setParam sets (or with nil removes) a parameter.
func (tc *testCase) setParam(p *openapi3.Parameter, v *string) {
	switch p.In {
	case "path":
		tc.path[p.Name] = *v
	case "header":
		tc.header.Del(p.Name)
		if v != nil {
			tc.header.Set(p.Name, *v)
		}
	case "query":
		var q [][2]string
		for _, kv := range tc.query {
			if kv[0] != p.Name {
				q = append(q, kv)
			}
		}
		if v != nil {
			q = append(q, [2]string{p.Name, *v})
		}
		tc.query = q
	}
}

// request is the HTTP request of tc against base, with credentials auth.
func (tc *testCase) request(base, auth string) (*http.Request, error) {
	path := tc.op.path
	for k, v := range tc.path {
		path = strings.ReplaceAll(path, "{"+k+"}", url.PathEscape(v))
	}
	q := make([]string, len(tc.query))
	for i, kv := range tc.query {
		q[i] = url.QueryEscape(kv[0]) + "=" + url.QueryEscape(kv[1])
	}
	target := base + path
	if len(q) > 0 {
		target += "?" + strings.Join(q, "&")
	}
	req, err := http.NewRequest(tc.op.method, target, bytes.NewReader(tc.body))
	if err != nil {
		return nil, err
	}
	req.Header = tc.header.Clone()
	if tc.ctype != "" {
		req.Header.Set("Content-Type", tc.ctype)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return req, nil
}

// validate checks tc against the document as a server would.
func (c *caseGen) validate(tc *testCase) error {
	req, err := tc.request("http://contract.test", "")
	if err != nil {
		return err
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return err
	}
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
}

// normalize gives v the types a JSON decoder gives (float64 numbers).
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// curl is tc as a curl command line, for failure reports.
func (tc *testCase) curl(base, auth string) string {
	req, err := tc.request(base, "")
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "curl -X %s '%s'", req.Method, req.URL)
	if auth != "" {
		fmt.Fprintf(&b, " -H 'Authorization: %s'", auth)
	}
	for _, k := range sortedKeys(req.Header) {
		for _, v := range req.Header[k] {
			fmt.Fprintf(&b, " -H '%s: %s'", k, v)
		}
	}
	if len(tc.body) > 0 {
		body := string(tc.body)
		if len(body) > 1500 {
			body = body[:1500] + "…"
		}
		fmt.Fprintf(&b, " --data-binary %s", shellQuote(body))
	}
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
