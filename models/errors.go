package models

import (
	"errors"
	"fmt"
)

// Domain error codes. The API maps each to one HTTP status in one place.
const (
	EINVALID      = "invalid"      // the input breaks a rule; Field names it
	ENOTFOUND     = "not_found"    // no such row in the caller's organization
	ECONFLICT     = "conflict"     // a unique rule or the current state forbids it
	EUNAUTHORIZED = "unauthorized" // the credentials are missing or wrong
	EFORBIDDEN    = "forbidden"    // the caller may not do this
	ETOOLARGE     = "too_large"    // a body or file is over its size limit
	EUNAVAILABLE  = "unavailable"  // a dependency is down; try again later
	EINTERNAL     = "internal"     // anything else; its text is never shown
)

// Error is a domain error: a code, a human detail and, for invalid input,
// the field it concerns. Title overrides the default title of the code (for
// example "Job Not Found").
type Error struct {
	Code   string
	Title  string
	Detail string
	Field  string
	Causes []Cause
}

// Cause is one of several reasons behind an error.
type Cause struct {
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Detail)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Detail)
}

// Errorf returns an *Error with the given code and a formatted detail.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Invalid returns an EINVALID error about one field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Detail: fmt.Sprintf(format, args...)}
}

// NotFound returns the ENOTFOUND error of a resource, titled "<Resource> Not Found".
func NotFound(resource, detail string) *Error {
	return &Error{Code: ENOTFOUND, Title: resource + " Not Found", Detail: detail}
}

// ErrorCode returns the code of err: its own for an *Error, EUNAVAILABLE for
// a transient store error (IsUnavailable), EINTERNAL for any other non-nil
// error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	}
	if errors.As(err, &e) {
		return e.Code
	}
	if IsTransient(err) {
		return EUNAVAILABLE
	}
	return EINTERNAL
}
