package apitest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"iam/api"
)

// contract checks responses against api/openapi.yaml.
type contract struct {
	doc    *openapi3.T
	router routers.Router
}

var loadContract = sync.OnceValues(func() (*contract, error) {
	// The OAuth pages answer HTML; CSV downloads answer text. Check their
	// status and content type, and their bodies as plain text.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("text/csv", openapi3filter.PlainBodyDecoder)
	doc, err := api.LoadOpenAPI()
	if err != nil {
		return nil, err
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &contract{doc: doc, router: router}, nil
})

// CheckResponse fails t when the response to req is not one the OpenAPI
// document allows: an undocumented route, status or body shape. body is the
// response body already read.
func CheckResponse(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	c, err := loadContract()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Errorf("contract: %s %s is not in the OpenAPI document: %v", req.Method, req.URL.Path, err)
		return
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
		t.Errorf("contract: %s %s answered %d with a body the OpenAPI document does not allow: %v\nbody: %s",
			req.Method, req.URL.String(), resp.StatusCode, err, truncate(body, 2000))
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
