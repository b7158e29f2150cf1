package activities

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Event hook sending: the Standard Webhooks request, signed, over a client
// that checks where it connects.

// HookTimeout bounds one delivery attempt: connecting, sending and reading
// the answer.
const HookTimeout = 10 * time.Second

// maxHookResponse caps how much of a receiver's answer is read.
const maxHookResponse = 64 << 10

// blockedPrefixes are the ranges a hook may not reach unless
// IAM_EVENT_HOOKS_ALLOW_PRIVATE names them: loopback, private,
// link-local (the cloud metadata address 169.254.169.254 among them),
// carrier-grade NAT, multicast, unspecified and the other special-purpose
// ranges, and the IPv6 ones (with the metadata address fd00:ec2::254 in
// fc00::/7).
var blockedPrefixes = mustPrefixes("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
	"203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
	"::/128", "::1/128", "64:ff9b::/96", "100::/64", "2001:db8::/32", "fc00::/7", "fe80::/10", "ff00::/8")

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// ParseCIDRs reads a comma-separated list of CIDRs
// (IAM_EVENT_HOOKS_ALLOW_PRIVATE).
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ErrAddressRefused is the error of a connection to a refused address.
var ErrAddressRefused = errors.New("address refused")

// AddressAllowed reports whether a hook may connect to addr: not in a
// blocked range, or in one of allow.
func AddressAllowed(addr netip.Addr, allow []netip.Prefix) bool {
	addr = addr.Unmap()
	for _, p := range allow {
		if p.Contains(addr) {
			return true
		}
	}
	for _, p := range blockedPrefixes {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// NewHookClient returns the HTTP client of deliveries: its dialer checks
// every address it connects to (after resolution, so a name whose answer
// changed since the hook was saved is caught), it follows no redirect and
// uses no proxy, and each request ends after HookTimeout.
func NewHookClient(allow []netip.Prefix, maxConns int) *http.Client {
	return newHookClient(allow, maxConns, nil)
}

// newHookClient is NewHookClient resolving names with resolver (nil: the
// system's).
func newHookClient(allow []netip.Prefix, maxConns int, resolver *net.Resolver) *http.Client {
	d := &net.Dialer{Timeout: HookTimeout, Resolver: resolver, Control: func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrAddressRefused, address)
		}
		if !AddressAllowed(ap.Addr(), allow) {
			return fmt.Errorf("%w: %s is in a private or reserved range", ErrAddressRefused, ap.Addr())
		}
		return nil
	}}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          maxConns * 4,
		MaxIdleConnsPerHost:   maxConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   HookTimeout,
		ResponseHeaderTimeout: HookTimeout,
	}
	return &http.Client{Transport: t, Timeout: HookTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Sign returns the webhook-signature header of a message: "v1,<base64
// HMAC-SHA256 of id.timestamp.body>" for each key, space-separated.
func Sign(keys [][]byte, id string, ts int64, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write([]byte(strconv.FormatInt(ts, 10)))
		m.Write([]byte{'.'})
		m.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	return strings.Join(sigs, " ")
}

// hookResult is one attempt's outcome.
type hookResult struct {
	status  int
	latency time.Duration
	err     string
}

func (r hookResult) ok() bool { return r.err == "" && r.status >= 200 && r.status < 300 }

// send makes one attempt: POST body to url with the Standard Webhooks
// headers. Errors name what failed, never a secret or the URL's query.
func send(ctx context.Context, c *http.Client, url, id string, keys [][]byte, body []byte, now time.Time) hookResult {
	ts := now.Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return hookResult{err: "invalid request"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "iam-event-hooks/1")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(keys, id, ts, body))
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return hookResult{latency: time.Since(start), err: describeSendError(err)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxHookResponse))
	_ = resp.Body.Close()
	r := hookResult{status: resp.StatusCode, latency: time.Since(start)}
	if !r.ok() {
		r.err = fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	return r
}

// describeSendError is an attempt's error as the delivery log shows it:
// its class, without the URL (which may carry a token in its query).
func describeSendError(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, ErrAddressRefused):
		msg := err.Error()
		if i := strings.Index(msg, ErrAddressRefused.Error()+": "); i >= 0 {
			return "refused: " + msg[i+len(ErrAddressRefused.Error())+2:]
		}
		return "refused: the address is in a private or reserved range"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "DNS: " + dnsErr.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return "connection: " + oe.Op + " " + hookErrText(oe.Err)
	}
	return "connection error"
}

func hookErrText(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}
