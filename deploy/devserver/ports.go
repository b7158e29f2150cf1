package devserver

import (
	"fmt"
	"net"
	"runtime"
	"strconv"
)

// freePort asks the kernel for a free TCP port on ip and returns it.
//
// The port is released before the caller binds it, so another process could
// in theory take it first. To keep the kernel from handing the same number to
// the next bind(":0") (Linux randomizes and may repeat ephemeral ports soon),
// the port is parked in TIME_WAIT: we connect to it and close the accepted
// side first. Binding it explicitly still works because Go listeners set
// SO_REUSEADDR. macOS and Windows allocate sequentially and need no trick.
func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("pick a free port on %s: %w", ip, err)
	}
	defer func() { _ = l.Close() }() // only read: a failed close loses nothing
	port := l.Addr().(*net.TCPAddr).Port

	if runtime.GOOS != "darwin" && runtime.GOOS != "windows" {
		c, err := net.Dial("tcp", net.JoinHostPort(dialIP(ip), strconv.Itoa(port)))
		if err == nil {
			if s, err := l.Accept(); err == nil {
				_ = s.Close() // server side closes first: it holds the TIME_WAIT
			}
			_ = c.Close()
		}
	}
	return port, nil
}

// checkPortFree reports a clear error when ip:port cannot be bound, before the
// server or the UI try it (both would otherwise end the process).
func checkPortFree(what, ip string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%s port %d on %s is not available: %w", what, port, ip, err)
	}
	return l.Close()
}

// dialIP is the address a local client uses to reach a listener bound on ip:
// the loopback address when ip is a wildcard (0.0.0.0 or ::).
func dialIP(ip string) string {
	parsed := net.ParseIP(ip)
	switch {
	case parsed == nil || !parsed.IsUnspecified():
		return ip
	case parsed.To4() != nil:
		return "127.0.0.1"
	default:
		return "::1"
	}
}
