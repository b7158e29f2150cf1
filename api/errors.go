package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/listing"
)

// Error codes of the error body. The first five come from the interface
// specification; the others are the service's own. The table is repeated in
// api/openapi.yaml (components.schemas.Error).
const (
	CodeInternal         = "00000000" // 500 Internal Server Error
	CodeUnauthorized     = "00000101" // 401 Unauthorized
	CodeAccessDenied     = "00000102" // 403 Access Denied
	CodeNotFound         = "00000103" // 404 "<Resource> Not Found"
	CodeConflict         = "00000105" // 409 Conflict
	CodeRouteNotFound    = "00000106" // 404 Route Not Found, 405 Method Not Allowed
	CodeInvalidParameter = "00000107" // 400 Invalid Parameter (query parameters)
	CodeInvalidBody      = "00000108" // 400 Invalid Request Body (not JSON, wrong types)
	CodeInvalidField     = "00000109" // 400 Invalid Field (a field breaks a rule)
	CodeTooLarge         = "00000110" // 413 Request Too Large
	CodeMediaType        = "00000111" // 415 Unsupported Media Type
	CodeRateLimited      = "00000112" // 429 Too Many Requests
	CodeUnavailable      = "00000113" // 503 Service Unavailable
	CodeCSVUploadFailed  = "00000114" // 400 CSV_UPLOAD_FAILED
)

// ErrorBody is the error response of every /api/v1 route.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code   string         `json:"code"`
	Title  string         `json:"title"`
	Detail string         `json:"detail"`
	Causes []models.Cause `json:"causes,omitempty"`
}

// apiError is an error that already knows its HTTP status and body. Values
// are made fresh by constructors for each answer and never shared between
// requests: no package-level *apiError exists, and toAPIError hands out a
// copy, so that a handler adding causes cannot reach another answer.
type apiError struct {
	Status int
	Body   ErrorDetail
	// RetryAfter, in seconds, is sent as Retry-After when positive.
	RetryAfter int
}

func (e *apiError) Error() string { return e.Body.Title + ": " + e.Body.Detail }

func newAPIError(status int, code, title, detail string) *apiError {
	return &apiError{Status: status, Body: ErrorDetail{Code: code, Title: title, Detail: detail}}
}

// errUnauthorized is the answer to a missing, malformed, expired or revoked token.
func errUnauthorized() *apiError {
	return newAPIError(http.StatusUnauthorized, CodeUnauthorized, "Unauthorized", "the OAuth token is invalid")
}

// errInternal is the answer to an unexpected failure; its cause is logged,
// never sent.
func errInternal() *apiError {
	return newAPIError(http.StatusInternalServerError, CodeInternal, "Internal Server Error", "unexpected internal error, retry later")
}

func errAccessDenied(detail string) *apiError {
	return newAPIError(http.StatusForbidden, CodeAccessDenied, "Access Denied", detail)
}

func errInvalidBody(format string, args ...any) *apiError {
	return newAPIError(http.StatusBadRequest, CodeInvalidBody, "Invalid Request Body", fmt.Sprintf(format, args...))
}

// asParamError turns a rule broken by a query parameter into 00000107
// Invalid Parameter; other errors pass. (A models.Invalid error is
// otherwise 00000109 Invalid Field, the answer for a body's field.)
func asParamError(err error) error {
	var me *models.Error
	if errors.As(err, &me) && me.Code == models.EINVALID {
		return newAPIError(http.StatusBadRequest, CodeInvalidParameter, "Invalid Parameter", me.Field+": "+me.Detail)
	}
	return err
}

// toAPIError maps any error to its status and body, in one place. The
// result is the caller's own: a fresh value, never one shared with another
// request.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		out := *ae
		out.Body.Causes = slices.Clone(ae.Body.Causes)
		return &out
	}
	var pe *listing.ParamError
	if errors.As(err, &pe) {
		return newAPIError(http.StatusBadRequest, CodeInvalidParameter, "Invalid Parameter", pe.Error())
	}
	var me *models.Error
	if errors.As(err, &me) {
		return fromModelsError(me)
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return newAPIError(http.StatusRequestEntityTooLarge, CodeTooLarge, "Request Too Large",
			fmt.Sprintf("the request body is larger than %d bytes", tooLarge.Limit))
	}
	if models.IsUnavailable(err) {
		return errUnavailable("Service Unavailable", unavailableDetail)
	}
	return errInternal()
}

func fromModelsError(e *models.Error) *apiError {
	title := func(def string) string {
		if e.Title != "" {
			return e.Title
		}
		return def
	}
	detail := e.Detail
	if e.Field != "" {
		detail = e.Field + ": " + e.Detail
	}
	var out *apiError
	switch e.Code {
	case models.EINVALID:
		out = newAPIError(http.StatusBadRequest, CodeInvalidField, title("Invalid Field"), detail)
	case models.ENOTFOUND:
		out = newAPIError(http.StatusNotFound, CodeNotFound, title("Not Found"), detail)
	case models.ECONFLICT:
		out = newAPIError(http.StatusConflict, CodeConflict, title("Conflict"), detail)
	case models.EUNAUTHORIZED:
		out = errUnauthorized()
	case models.EFORBIDDEN:
		out = errAccessDenied(detail)
	case models.ETOOLARGE:
		out = newAPIError(http.StatusRequestEntityTooLarge, CodeTooLarge, title("Request Too Large"), detail)
	case models.EUNAVAILABLE:
		out = errUnavailable(title("Service Unavailable"), detail)
	default:
		return toAPIError(errors.New(e.Detail))
	}
	out.Body.Causes = slices.Clone(e.Causes)
	return out
}

// abortWithError answers the request with err's error body. Internal errors
// are logged with the request id; their text never reaches the client.
func abortWithError(c *gin.Context, err error) {
	ae := toAPIError(err)
	if ae.Status == http.StatusServiceUnavailable {
		logger(c).Warn("request not served: a dependency is unavailable", "error", err.Error())
	} else if ae.Status >= 500 {
		logger(c).Error("request failed", "error", err, "status", ae.Status)
	}
	if ae.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(ae.RetryAfter))
	}
	c.AbortWithStatusJSON(ae.Status, ErrorBody{Error: ae.Body})
}

// logger returns the request's logger (with its request id).
func logger(c *gin.Context) *slog.Logger {
	if l, ok := c.Get(ctxLogger); ok {
		return l.(*slog.Logger)
	}
	return slog.Default()
}
