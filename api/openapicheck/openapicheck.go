// Package openapicheck checks HTTP responses against the service's OpenAPI
// document (api/openapi.yaml). Tests use it through api/apitest; the api
// package's own tests, which cannot import apitest, use it directly.
package openapicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Checker checks responses against one OpenAPI document.
type Checker struct {
	doc    *openapi3.T
	router routers.Router
}

var registerDecoders sync.Once

// New returns a checker of doc.
func New(doc *openapi3.T) (*Checker, error) {
	registerDecoders.Do(func() {
		// The OAuth pages answer HTML; CSV downloads and metrics answer
		// text, the audit exports NDJSON (one JSON document a line, which
		// their tests decode), job event streams Server-Sent Events. Check
		// their status and content type, and their bodies as plain text.
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
		openapi3filter.RegisterBodyDecoder("text/csv", openapi3filter.PlainBodyDecoder)
		openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.PlainBodyDecoder)
		openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
		// SCIM's media type (/scim/v2) is JSON.
		openapi3filter.RegisterBodyDecoder("application/scim+json", openapi3filter.JSONBodyDecoder)
	})
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &Checker{doc: doc, router: router}, nil
}

// Check fails t when the response to req is not one the document allows: an
// undocumented route, status or body shape. body is the response body
// already read.
func (c *Checker) Check(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	if err := c.validate(req, resp, body); err != nil {
		t.Errorf("contract: %v", err)
	}
}

// CheckRouteOrError is Check for a route that is in the document; for one
// that is not (an unknown route, a test's own route), it checks that an
// error answer (status 400 and up) is a JSON body of the document's schema
// errorSchema ("Error" under /api/v1, "OAuthError" under /oauth/v2), as
// the document promises for every path.
func (c *Checker) CheckRouteOrError(t testing.TB, req *http.Request, resp *http.Response, body []byte, errorSchema string) {
	t.Helper()
	if _, _, err := c.router.FindRoute(req); err == nil {
		c.Check(t, req, resp, body)
		return
	}
	if resp.StatusCode < 400 {
		return // a route the document does not have answered; nothing documents it
	}
	if err := c.validateError(resp, body, errorSchema); err != nil {
		t.Errorf("contract: %s %s answered %d with a body that is not the document's %s: %v\nbody: %s",
			req.Method, req.URL.String(), resp.StatusCode, errorSchema, err, truncate(body, 2000))
	}
}

// Validate returns why the response to req is not one the document allows
// (an undocumented route, status, content type or body shape), or nil. The
// contract fuzzer (cmd/contractfuzz) checks its answers with it.
func (c *Checker) Validate(req *http.Request, resp *http.Response, body []byte) error {
	return c.validate(req, resp, body)
}

func (c *Checker) validate(req *http.Request, resp *http.Response, body []byte) error {
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s is not in the OpenAPI document: %w", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: params,
			Route:      route,
			Options:    &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: resp.StatusCode,
		Header: resp.Header,
		Body:   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s answered %d with a body the OpenAPI document does not allow: %w\nbody: %s",
			req.Method, req.URL.String(), resp.StatusCode, err, truncate(body, 2000))
	}
	return nil
}

// validateError checks an error answer against a schema of the document's
// components.
func (c *Checker) validateError(resp *http.Response, body []byte, schema string) error {
	ref := c.doc.Components.Schemas[schema]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("the document has no %s schema", schema)
	}
	if ct := resp.Header.Get("Content-Type"); !bytes.HasPrefix([]byte(ct), []byte("application/json")) {
		return fmt.Errorf("content type %q, want application/json", ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	return ref.Value.VisitJSON(v)
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
