package apitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// recorder is a testing.TB that keeps failures instead of failing.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Helper() {}

func TestCheckResponse_RefusesWhatTheDocumentDoesNotAllow(t *testing.T) {
	cases := []struct {
		name, path string
		status     int
		body       string
		wantFail   bool
	}{
		{"documented error", "/api/v1/jobs/1", 404, `{"error":{"code":"00000103","title":"Job Not Found","detail":"x"}}`, false},
		{"error body of the wrong shape", "/api/v1/jobs/1", 404, `{"message":"not found"}`, true},
		{"undocumented status", "/api/v1/jobs/1", 418, `{}`, true},
		{"undocumented route", "/api/v1/nowhere", 200, `{}`, true},
		{"job missing a required field", "/api/v1/jobs/1", 200, `{"id":"1"}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{"Content-Type": {"application/json"}}}
			rec := &recorder{TB: t}
			CheckResponse(rec, req, resp, []byte(tc.body))
			if failed := len(rec.failures) > 0; failed != tc.wantFail {
				t.Errorf("failed=%v (%v), want failed=%v", failed, rec.failures, tc.wantFail)
			}
		})
	}
}
