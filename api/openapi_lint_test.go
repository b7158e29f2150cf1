package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// operationIDShape is a readable camelCase identifier: a lower-case word,
// then words that start upper-case (acronyms allowed: uploadEnrollmentCSV).
var operationIDShape = regexp.MustCompile(`^[a-z][a-z0-9]*([A-Z][a-zA-Z0-9]*)*$`)

// lintOpenAPI checks what client generators and OpenAPI linters ask of the
// document: every operation has a camelCase operationId used once, every
// tag it uses is declared with a description, and it has at least one 2xx
// and one 4xx response. It returns one line per problem.
func lintOpenAPI(doc *openapi3.T) []string {
	var problems []string
	described := map[string]bool{}
	for _, tag := range doc.Tags {
		described[tag.Name] = strings.TrimSpace(tag.Description) != ""
	}
	seen := map[string]string{}
	paths := doc.Paths.InMatchingOrder()
	slices.Sort(paths)
	for _, path := range paths {
		for method, op := range doc.Paths.Value(path).Operations() {
			where := method + " " + path
			switch {
			case op.OperationID == "":
				problems = append(problems, where+": no operationId")
			case !operationIDShape.MatchString(op.OperationID):
				problems = append(problems, fmt.Sprintf("%s: operationId %q is not camelCase", where, op.OperationID))
			case seen[op.OperationID] != "":
				problems = append(problems, fmt.Sprintf("%s: operationId %q is also used by %s", where, op.OperationID, seen[op.OperationID]))
			default:
				seen[op.OperationID] = where
			}
			if len(op.Tags) == 0 {
				problems = append(problems, where+": no tag")
			}
			for _, tag := range op.Tags {
				if !described[tag] {
					problems = append(problems, fmt.Sprintf("%s: tag %q is not declared with a description", where, tag))
				}
			}
			var ok2xx, ok4xx bool
			for code := range op.Responses.Map() {
				ok2xx = ok2xx || strings.HasPrefix(code, "2") || code == "303" && isFormPost(op)
				ok4xx = ok4xx || strings.HasPrefix(code, "4")
			}
			if !ok2xx {
				problems = append(problems, where+": no 2xx response")
			}
			if !ok4xx && !noClientError(op) {
				problems = append(problems, where+": no 4xx response")
			}
		}
	}
	slices.Sort(problems)
	return problems
}

// isFormPost says whether op is a browser form post: its success is the
// 303 See Other to the next page (POST-redirect-GET), not a 2xx.
func isFormPost(op *openapi3.Operation) bool {
	return op.RequestBody != nil && op.RequestBody.Value != nil &&
		op.RequestBody.Value.Content.Get("application/x-www-form-urlencoded") != nil
}

// noClientError says whether op may go without a 4xx response: it takes no
// input at all (no parameters, body or credentials) and says why in
// x-no-client-error.
func noClientError(op *openapi3.Operation) bool {
	why, _ := op.Extensions["x-no-client-error"].(string)
	public := op.Security != nil && len(*op.Security) == 0
	return strings.TrimSpace(why) != "" && public && len(op.Parameters) == 0 && op.RequestBody == nil
}

// The document is fit to generate clients from (operation ids, described
// tags, success and error responses on every operation).
func TestOpenAPI_LintsClean(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lintOpenAPI(doc) {
		t.Error(p)
	}
}

// The lint catches each kind of problem: it is not a test that cannot fail.
func TestOpenAPI_LintCatchesEachProblem(t *testing.T) {
	const src = `
openapi: 3.0.3
info: {title: t, version: "1"}
tags:
  - name: Described
    description: Something.
  - name: Bare
paths:
  /a:
    get:
      operationId: getA
      tags: [Described]
      responses:
        "200": {description: ok}
        "404": {description: missing}
    post:
      tags: [Bare]
      responses:
        "201": {description: ok}
        "400": {description: bad}
  /b:
    get:
      operationId: getA
      tags: [Described]
      responses:
        "400": {description: bad}
    delete:
      operationId: Delete_B
      tags: [Undeclared]
      responses:
        "204": {description: gone}
  /c:
    get:
      operationId: getC
      tags: [Described]
      security: []
      x-no-client-error: No input.
      responses:
        "200": {description: ok}
    put:
      operationId: putC
      tags: [Described]
      x-no-client-error: Says so, but takes credentials.
      responses:
        "200": {description: ok}
    post:
      operationId: postC
      tags: [Described]
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema: {type: object}
      responses:
        "303": {description: next page}
        "403": {description: csrf}
    patch:
      operationId: patchC
      tags: [Described]
      responses:
        "303": {description: not a form post}
        "400": {description: bad}
`
	doc, err := openapi3.NewLoader().LoadFromData([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := lintOpenAPI(doc)
	want := []string{
		`DELETE /b: no 4xx response`,
		`DELETE /b: operationId "Delete_B" is not camelCase`,
		`DELETE /b: tag "Undeclared" is not declared with a description`,
		`GET /b: no 2xx response`,
		`GET /b: operationId "getA" is also used by GET /a`,
		`PUT /c: no 4xx response`,
		`PATCH /c: no 2xx response`,
		`POST /a: no operationId`,
		`POST /a: tag "Bare" is not declared with a description`,
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("lint found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The served /api/v1/openapi.json is api/openapi.yaml itself: the same
// operations with the same ids.
func TestOpenAPI_ServedDocumentIsTheContract(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	srv := newPlumbingServer(t)
	resp, err := http.Get(srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // only read: a close error tells the test nothing
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(got) != string(want) {
		t.Fatalf("GET /api/v1/openapi.json: %d, %d bytes; want the contract's %d bytes", resp.StatusCode, len(got), len(want))
	}
	served, err := openapi3.NewLoader().LoadFromData(got)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(d *openapi3.T) (out []string) {
		for _, path := range d.Paths.InMatchingOrder() {
			for m, op := range d.Paths.Value(path).Operations() {
				out = append(out, m+" "+path+" "+op.OperationID)
			}
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(ids(served), ids(doc)) {
		t.Errorf("served operations differ from the contract's:\n%v\n%v", ids(served), ids(doc))
	}
}
