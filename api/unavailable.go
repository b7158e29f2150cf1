package api

import (
	"net/http"

	"iam/api/auth"
)

// unavailableDetail is the detail of a 503 caused by the database.
const unavailableDetail = "the service is temporarily unavailable; retry after the time in Retry-After, with the same token"

// errUnavailable is a 503 Service Unavailable (00000113) with Retry-After.
func errUnavailable(title, detail string) *apiError {
	e := newAPIError(http.StatusServiceUnavailable, CodeUnavailable, title, detail)
	e.RetryAfter = auth.RetryAfterSeconds
	return e
}
