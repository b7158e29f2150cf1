package apitest

import (
	"net/http"
	"sync"
	"testing"

	"iam/api"
	"iam/api/openapicheck"
)

// loadContract is the checker of api/openapi.yaml.
var loadContract = sync.OnceValues(func() (*openapicheck.Checker, error) {
	doc, err := api.LoadOpenAPI()
	if err != nil {
		return nil, err
	}
	return openapicheck.New(doc)
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
	c.Check(t, req, resp, body)
}

// CheckErrorOfUnknownRoute is CheckResponse for a request to a route the
// document does not have on purpose (an unknown path, a test's own route):
// an error answer must still be a body of the document's errorSchema
// ("Error" under /api/v1, "OAuthError" under /oauth/v2).
func CheckErrorOfUnknownRoute(t testing.TB, req *http.Request, resp *http.Response, body []byte, errorSchema string) {
	t.Helper()
	c, err := loadContract()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	c.CheckRouteOrError(t, req, resp, body, errorSchema)
}
