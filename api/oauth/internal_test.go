package oauth

import (
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestParseScopes(t *testing.T) {
	for raw, want := range map[string][]string{
		"svc.user.READ,svc.group.READ":      {"svc.user.READ", "svc.group.READ"},
		"svc.user.READ svc.group.READ":      {"svc.user.READ", "svc.group.READ"},
		" svc.user.READ , svc.user.READ ,,": {"svc.user.READ"},
		"":                                  {},
	} {
		if got := ParseScopes(raw); !slices.Equal(got, want) {
			t.Errorf("ParseScopes(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestKnownScope(t *testing.T) {
	for scope, want := range map[string]bool{
		"svc.user.READ":                        true,
		"svc.device.write":                     true,
		"svc.conditional_access_policy.All":    true,
		"svc.unknown.READ":                     false,
		"svc.user.EXECUTE":                     false,
		"svcpod.user.READ":                     false,
		"svc.user":                             false,
		offlineScope:                           false,
		"svc.notification_template.DELETE":     true,
		"svc.quick_enrollment.UPDATE":          true,
		"svc.conditional_factor_config.CREATE": true,
	} {
		if got := knownScope(scope); got != want {
			t.Errorf("knownScope(%q) = %v", scope, got)
		}
	}
	if d := describeScope("svc.job.READ"); d != "Read jobs" {
		t.Errorf("describeScope = %q", d)
	}
}

func TestClientKey(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cases := []struct {
		remote, xff, want string
	}{
		{"192.0.2.7:5000", "", "192.0.2.7"},
		{"192.0.2.7:5000", "198.51.100.1", "192.0.2.7"},                          // not a trusted proxy: header ignored
		{"10.0.0.2:5000", "198.51.100.1", "198.51.100.1"},                        // behind a trusted proxy
		{"10.0.0.2:5000", "203.0.113.9, 198.51.100.1, 10.0.0.3", "198.51.100.1"}, // rightmost untrusted hop
		{"[2001:db8:1:2:3:4:5:6]:443", "", "2001:db8:1:2::/64"},
	}
	for _, tc := range cases {
		r := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := clientKey(r, trusted); got != tc.want {
			t.Errorf("clientKey(%s, %q) = %q, want %q", tc.remote, tc.xff, got, tc.want)
		}
	}
}

func TestLimiter(t *testing.T) {
	l := newLimiter(RateLimit{PerMinute: 60, Burst: 2})
	now := time.Unix(1000, 0)
	for range 2 { // the burst
		if l.wait("a", now) != 0 {
			t.Fatal("the burst is refused")
		}
	}
	if w := l.wait("a", now); w != time.Second {
		t.Errorf("beyond the burst: wait %v, want 1s", w)
	}
	if l.wait("b", now) != 0 {
		t.Error("another client is limited too")
	}
	if l.wait("a", now.Add(time.Second)) != 0 {
		t.Error("a second later one request is allowed again")
	}
	// Idle buckets are dropped.
	l.wait("c", now.Add(time.Hour))
	if len(l.buckets) != 1 {
		t.Errorf("%d buckets after an hour, want 1", len(l.buckets))
	}
	if newLimiter(RateLimit{}) != nil || newLimiter(RateLimit{}).wait("x", now) != 0 {
		t.Error("a zero rate limits")
	}
}
