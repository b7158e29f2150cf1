package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"
)

// OpenAPIYAML is the contract of the HTTP surface (api/openapi.yaml). The
// contract tests check every response the test suite produces against it.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// LoadOpenAPI parses and validates the OpenAPI document.
func LoadOpenAPI() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPIYAML)
	if err != nil {
		return nil, fmt.Errorf("parse openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("validate openapi.yaml: %w", err)
	}
	return doc, nil
}

var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	doc, err := LoadOpenAPI()
	if err != nil {
		return nil, err
	}
	return json.Marshal(doc)
})

// openAPI serves the document as JSON. It is public: it describes the
// surface, it holds no data.
func (s *Server) openAPI(c *gin.Context) error {
	body, err := openAPIJSON()
	if err != nil {
		return err
	}
	c.Data(http.StatusOK, "application/json", body)
	return nil
}
