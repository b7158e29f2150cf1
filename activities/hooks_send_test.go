package activities

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestAddressAllowed(t *testing.T) {
	allow := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}
	for addr, want := range map[string]bool{
		"93.184.216.34": true, "2606:4700::1": true,
		"127.0.0.1": false, "::1": false, "10.0.0.1": false, "172.16.3.4": false, "192.168.1.1": false,
		"169.254.169.254": false, "fd00:ec2::254": false, "fe80::1": false, "224.0.0.1": false, "ff02::1": false,
		"0.0.0.0": false, "::": false, "100.64.0.1": false, "::ffff:127.0.0.1": false,
		"10.1.2.3": true, // named by the allow-list
	} {
		if got := AddressAllowed(netip.MustParseAddr(addr), allow); got != want {
			t.Errorf("%s: allowed %v, want %v", addr, got, want)
		}
	}
}

// TestHookClient_RefusesAtDialTime: the check runs on the address a name
// resolves to when connecting (localhost: loopback), not on the URL, and
// the error names neither the URL's query nor anything secret.
func TestHookClient_RefusesAtDialTime(t *testing.T) {
	hit := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	defer srv.Close()
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/hook?token=s3cret"
	r := send(context.Background(), NewHookClient(nil, 1), url, "msg_1", [][]byte{[]byte("k")}, []byte("{}"), time.Now())
	if r.ok() || !strings.HasPrefix(r.err, "refused") || strings.Contains(r.err, "s3cret") || hit {
		t.Fatalf("result %+v, receiver hit %v", r, hit)
	}
	r = send(context.Background(), NewHookClient([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, 1),
		url, "msg_1", [][]byte{[]byte("k")}, []byte("{}"), time.Now())
	if !r.ok() || !hit {
		t.Fatalf("allowed: %+v", r)
	}
}

// TestHookClient_NoRedirects: a 3xx is an answer (a failure), not followed.
func TestHookClient_NoRedirects(t *testing.T) {
	followed := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/next" {
			followed = true
			return
		}
		http.Redirect(w, r, "/next", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	r := send(context.Background(), NewHookClient([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, 1), srv.URL, "msg_1",
		[][]byte{[]byte("k")}, []byte("{}"), time.Now())
	if r.ok() || r.status != http.StatusTemporaryRedirect || followed {
		t.Fatalf("redirect: %+v followed %v", r, followed)
	}
}

// TestSign: the Standard Webhooks specification's example (secret
// whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, id msg_p5jXN8AQM9LWM0D4loKWxJek,
// timestamp 1614265330).
func TestSign(t *testing.T) {
	key := []byte{0x31, 0xf2, 0x90, 0xf6, 0xbf, 0x06, 0x29, 0x8a, 0xab, 0x4f, 0x08, 0xd4, 0x3c, 0x3f, 0x08, 0x2c, 0xf6, 0x48, 0xa3, 0x62, 0xda, 0x2d, 0xa4, 0xb0}
	got := Sign([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if got != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Fatalf("signature %s", got)
	}
}
