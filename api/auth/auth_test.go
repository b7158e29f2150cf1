package auth

import (
	"net/http/httptest"
	"testing"
)

func TestScopes_Allows(t *testing.T) {
	cases := []struct {
		granted, required []string
		want              bool
	}{
		{[]string{"svc.job.READ"}, Scopes("job", "READ", "ALL"), true},
		{[]string{"svc.job.read"}, Scopes("job", "READ", "ALL"), true},
		{[]string{"svc.job.all"}, Scopes("job", "DELETE"), true},
		{[]string{"svc.job.ALL"}, Scopes("user", "READ"), false},
		{[]string{"svc.job.READ"}, Scopes("job", "DELETE", "ALL"), false},
		{[]string{"svc.Job.READ"}, Scopes("job", "READ"), false}, // resource is exact
		{[]string{"svcpod.job.READ"}, Scopes("job", "READ"), false},
		{[]string{"svc.job"}, Scopes("job", "READ"), false},
		{nil, Scopes("job", "READ"), false},
		{[]string{"svc.device.write"}, Scopes("device", "WRITE", "ALL"), true},
	}
	for _, tc := range cases {
		if got := Allows(tc.granted, tc.required); got != tc.want {
			t.Errorf("Allows(%v, %v) = %v, want %v", tc.granted, tc.required, got, tc.want)
		}
	}
}

func TestToken_OnlyInTheAuthorizationHeaderWithTheScheme(t *testing.T) {
	cases := []struct {
		target, header string
		want           string
		ok             bool
	}{
		{"/api/v1/users", "Service-oauthtoken abc", "abc", true},
		{"/api/v1/users", "Service-oauthtoken   abc  ", "abc", true},
		{"/api/v1/users", "Bearer abc", "", false},
		{"/api/v1/users", "service-oauthtoken abc", "", false}, // the scheme is exact
		{"/api/v1/users", "Service-oauthtoken ", "", false},
		{"/api/v1/users", "Service-oauthtoken", "", false},
		{"/api/v1/users", "", "", false},
		{"/api/v1/users?access_token=abc", "Service-oauthtoken abc", "", false},
		{"/api/v1/users?token=abc", "Service-oauthtoken abc", "", false},
	}
	for _, tc := range cases {
		r := httptest.NewRequest("GET", tc.target, nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		if got, ok := Token(r); got != tc.want || ok != tc.ok {
			t.Errorf("%s with %q: Token = %q, %v; want %q, %v", tc.target, tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSetRetryAfter(t *testing.T) {
	w := httptest.NewRecorder()
	SetRetryAfter(w.Header())
	if got := w.Header().Get("Retry-After"); got != "2" || RetryAfterSeconds != 2 {
		t.Errorf("Retry-After %q (RetryAfterSeconds %d), want 2", got, RetryAfterSeconds)
	}
}
