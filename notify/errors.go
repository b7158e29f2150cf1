package notify

import (
	"errors"
	"fmt"
)

// Class sorts the failure of one send by what it means for a retry.
type Class int

// The classes of failure.
const (
	// Temporary: nothing was delivered and a later try may succeed (a 4xx
	// reply, a connection that could not be opened or broke before the
	// message was complete, an HTTP 429 or 5xx).
	Temporary Class = iota + 1
	// Permanent: the server refused this message (a 5xx reply, a 4xx HTTP
	// answer, an address that is not one); trying again gives the same.
	Permanent
	// Uncertain: the message was handed over but its acceptance was never
	// heard (the connection died after the end of DATA, an HTTP request
	// timed out). It may have been delivered; sending it again may deliver
	// it twice.
	Uncertain
)

// String names the class.
func (c Class) String() string {
	switch c {
	case Temporary:
		return "temporary"
	case Permanent:
		return "permanent"
	case Uncertain:
		return "uncertain"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Error is a failed send with its class.
type Error struct {
	Class Class
	// Code is the SMTP reply code or HTTP status when there was one.
	Code int
	Err  error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Code != 0 {
		return fmt.Sprintf("%s failure (%d): %v", e.Class, e.Code, e.Err)
	}
	return fmt.Sprintf("%s failure: %v", e.Class, e.Err)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Classify returns the class of a send's error: Temporary for an error that
// is not an *Error (a cancelled context, say), and 0 for nil.
func Classify(err error) Class {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return Temporary
}

func temporary(code int, err error) error { return &Error{Class: Temporary, Code: code, Err: err} }
func permanent(code int, err error) error { return &Error{Class: Permanent, Code: code, Err: err} }
func uncertain(code int, err error) error { return &Error{Class: Uncertain, Code: code, Err: err} }
