package api

import "net/http"

// RetryAfterSeconds is the Retry-After of every 503 Service Unavailable: a
// dependency (the database, the workflow engine) is down or restarting. The
// client should send the same request again after it, with the same token.
const RetryAfterSeconds = 2

// unavailableDetail is the detail of a 503 caused by the database.
const unavailableDetail = "the service is temporarily unavailable; retry after the time in Retry-After, with the same token"

// errUnavailable is a 503 Service Unavailable (00000113) with Retry-After.
func errUnavailable(title, detail string) *apiError {
	e := newAPIError(http.StatusServiceUnavailable, CodeUnavailable, title, detail)
	e.RetryAfter = RetryAfterSeconds
	return e
}
