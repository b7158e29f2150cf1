// Package scim is the SCIM 2.0 surface (RFC 7643, RFC 7644) under /scim/v2,
// beside /api/v1: discovery, Users and Groups over the identity area's
// users and groups, in SCIM's media type, error schema and paging
// (docs/scim.md). It imports api/auth, never api; api/routes.go lists its
// routes with the rest of the service's surface and mounts them.
//
// A request carries "Authorization: Bearer <token>": a provisioning token
// of an organization (models/scim TokenStore), or an OAuth access token
// holding a svc.scim scope. Writes go through the identity area's store
// methods, each recording its audit event in its transaction with the
// token (a provisioning token is a client actor) as actor.
package scim

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"iam/api/auth"
	"iam/models"
	mscim "iam/models/scim"
	"iam/models/store"
)

// MediaType is SCIM's media type (RFC 7644 §8.1); application/json is
// accepted too.
const MediaType = "application/scim+json"

// Prefix is where the surface is mounted.
const Prefix = "/scim/v2"

// MaxBodyBytes caps a request body: room for a PATCH of 20,000 members.
const MaxBodyBytes = 4 << 20

// MaxOperations caps the operations of one PATCH; MaxValues the values of
// one operation (members, emails): more is tooMany.
const (
	MaxOperations = 1000
	MaxValues     = 20_000
)

// DefaultCount is a list's page size when the request names none.
const DefaultCount = 100

// Route is one /scim/v2 route: its method, its path (relative to /scim/v2)
// and its handler. Write routes need a write scope of an OAuth token.
type Route struct {
	Method  string
	Path    string
	Handler gin.HandlerFunc
	Write   bool
}

// Server serves /scim/v2.
type Server struct {
	store  *store.Store
	tokens auth.TokenValidator
	log    *slog.Logger
}

// New returns the SCIM surface over st, checking OAuth access tokens with
// tokens (nil: only provisioning tokens are accepted).
func New(st *store.Store, tokens auth.TokenValidator, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{store: st, tokens: tokens, log: log}
}

// Mount adds routes under Prefix to r, each behind the body limit, the
// media type check, the token check and its scope check.
func (s *Server) Mount(r *gin.Engine, routes []Route) {
	g := r.Group(Prefix, limitBody(MaxBodyBytes), mediaType())
	for _, rt := range routes {
		g.Handle(rt.Method, rt.Path, s.authenticate(rt.Write), rt.Handler)
	}
}

// Error is SCIM's error response (RFC 7644 §3.12).
type Error struct {
	Schemas  []string `json:"schemas"`
	Status   string   `json:"status"`
	ScimType string   `json:"scimType,omitempty"`
	Detail   string   `json:"detail,omitempty"`
}

// ErrorSchema is the URN of Error.
const ErrorSchema = "urn:ietf:params:scim:api:messages:2.0:Error"

// scimError is an error that knows its SCIM answer.
type scimError struct {
	status   int
	scimType string
	detail   string
}

func (e *scimError) Error() string { return e.detail }

func newError(status int, scimType, detail string) error {
	return &scimError{status: status, scimType: scimType, detail: detail}
}

func invalidValue(detail string) error {
	return newError(http.StatusBadRequest, "invalidValue", detail)
}
func invalidSyntax(detail string) error {
	return newError(http.StatusBadRequest, "invalidSyntax", detail)
}
func invalidPath(detail string) error { return newError(http.StatusBadRequest, "invalidPath", detail) }
func mutability(detail string) error  { return newError(http.StatusBadRequest, "mutability", detail) }
func noTarget(detail string) error    { return newError(http.StatusBadRequest, "noTarget", detail) }
func tooMany(detail string) error     { return newError(http.StatusBadRequest, "tooMany", detail) }

var errPreconditionFailed = &scimError{status: http.StatusPreconditionFailed, detail: "the resource has changed: its version no longer matches If-Match"}

// toSCIM maps an error to its SCIM answer: the domain errors of
// models/errors.go as api/errors.go maps them for /api/v1, in SCIM's shape.
func toSCIM(err error) *scimError {
	var se *scimError
	if errors.As(err, &se) {
		return se
	}
	var fe *mscim.FilterError
	if errors.As(err, &fe) {
		return &scimError{status: http.StatusBadRequest, scimType: "invalidFilter", detail: fe.Msg}
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return &scimError{status: http.StatusRequestEntityTooLarge, scimType: "tooLarge", detail: "the request body is larger than the limit"}
	}
	var me *models.Error
	if errors.As(err, &me) {
		detail := me.Detail
		if me.Field != "" {
			detail = me.Field + ": " + me.Detail
		}
		switch me.Code {
		case models.EINVALID:
			return &scimError{status: http.StatusBadRequest, scimType: "invalidValue", detail: detail}
		case models.ENOTFOUND:
			return &scimError{status: http.StatusNotFound, detail: detail}
		case models.ECONFLICT:
			return &scimError{status: http.StatusConflict, scimType: "uniqueness", detail: detail}
		case models.EUNAUTHORIZED:
			return &scimError{status: http.StatusUnauthorized, detail: "the bearer token is missing, unknown, expired or revoked"}
		case models.EFORBIDDEN:
			return &scimError{status: http.StatusForbidden, detail: detail}
		case models.ETOOLARGE:
			return &scimError{status: http.StatusRequestEntityTooLarge, scimType: "tooLarge", detail: detail}
		}
	}
	if models.IsUnavailable(err) {
		return &scimError{status: http.StatusServiceUnavailable, detail: "the service is unavailable; retry after the time in Retry-After"}
	}
	return &scimError{status: http.StatusInternalServerError, detail: "internal error"}
}

// abort answers err in SCIM's error shape.
func (s *Server) abort(c *gin.Context, err error) {
	se := toSCIM(err)
	if se.status == http.StatusInternalServerError {
		s.log.ErrorContext(c.Request.Context(), "scim", "method", c.Request.Method, "path", c.Request.URL.Path, "error", err)
	}
	if se.status == http.StatusServiceUnavailable {
		auth.SetRetryAfter(c.Writer.Header())
	}
	writeJSON(c, se.status, Error{Schemas: []string{ErrorSchema}, Status: itoa(se.status), ScimType: se.scimType, Detail: se.detail})
	c.Abort()
}

// handle adapts a handler returning an error.
func (s *Server) handle(h func(*gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			s.abort(c, err)
		}
	}
}

// writeJSON answers v in SCIM's media type.
func writeJSON(c *gin.Context, status int, v any) {
	body, err := appendJSON(make([]byte, 0, 4096), v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"schemas":["`+ErrorSchema+`"],"status":"500","detail":"internal error"}`)
	}
	writeBody(c, status, body)
}

// writeBody answers body, a JSON document, in SCIM's media type, with its
// length (a page of users goes out in one piece, not chunked).
func writeBody(c *gin.Context, status int, body []byte) {
	c.Header("Content-Length", strconv.Itoa(len(body)))
	c.Data(status, MediaType+"; charset=utf-8", body)
}

// limitBody caps the request body at limit bytes.
func limitBody(limit int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.Body != nil {
			c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
		}
		c.Next()
	}
}

// mediaType refuses a body in another media type than SCIM's or JSON
// (415, in SCIM's error shape).
func mediaType() gin.HandlerFunc {
	return func(c *gin.Context) {
		if ct := c.GetHeader("Content-Type"); ct != "" && c.Request.ContentLength != 0 {
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || mt != MediaType && mt != "application/json" {
				writeJSON(c, http.StatusUnsupportedMediaType, Error{Schemas: []string{ErrorSchema}, Status: "415",
					Detail: "the body must be " + MediaType + " or application/json"})
				c.Abort()
				return
			}
		}
		c.Next()
	}
}

// decode reads the JSON body into v: invalidSyntax when it is not JSON of
// v's shape.
func decode(c *gin.Context, v any) error {
	data, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return invalidSyntax("the body could not be read")
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return invalidSyntax("the body is empty")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return invalidSyntax("the body is not valid JSON of the expected shape: " + err.Error())
	}
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }
