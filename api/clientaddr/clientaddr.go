// Package clientaddr names the client of a request for the service's rate
// limits (the authorization server's, the agent channel's) under one rule
// of trusted proxies (IAM_TRUSTED_PROXIES).
package clientaddr

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Key names the client of r: its address, or, when the peer is a trusted
// proxy, the last address in X-Forwarded-For that is not one. IPv6 clients
// count by their /64 network.
func Key(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if isTrusted(addr, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break
			}
			addr = hop
			if !isTrusted(hop, trusted) {
				break
			}
		}
	}
	addr = addr.Unmap()
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

func isTrusted(addr netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(addr.Unmap()) {
			return true
		}
	}
	return false
}
