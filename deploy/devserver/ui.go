package devserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// webUI is the Temporal Web UI served from this process.
type webUI struct {
	srv  *uiserver.Server
	done chan struct{} // closed when srv.Start returns
}

// startUI serves the Web UI on ip:port for the frontend at frontendAddr and
// returns once it answers its health check.
//
// The ui-server's Start blocks and ends the process if it cannot listen, so
// the port is checked first (and a port of our choosing was parked by
// freePort); a port taken in the split second between the two checks is the
// only way left to hit that exit.
func startUI(ctx context.Context, ip string, port int, frontendAddr, namespace string) (ui *webUI, err error) {
	if err = checkPortFree("UI", ip, port); err != nil {
		return nil, err
	}
	host := ip
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // the UI joins host and port with a plain colon
	}
	cfg := &uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		// Served over plain HTTP on a developer machine.
		CORS:             uiconfig.CORS{CookieInsecure: true},
		HideLogs:         true,
		DisableNewsFetch: true,
	}

	defer func() { // NewServer panics on a configuration it cannot use
		if r := recover(); r != nil {
			err = fmt.Errorf("web UI: %v", r)
		}
	}()
	srv := uiserver.NewServer(uioptions.WithConfigProvider(cfg))
	ui = &webUI{srv: srv, done: make(chan struct{})}
	go func() {
		defer close(ui.done)
		_ = srv.Start() // returns nil once Stop closes it
	}()

	if err := waitHTTPReady(ctx, "http://"+net.JoinHostPort(dialIP(ip), strconv.Itoa(port))+"/healthz"); err != nil {
		ui.stop()
		return nil, fmt.Errorf("web UI did not come up: %w", err)
	}
	return ui, nil
}

func (u *webUI) stop() {
	u.srv.Stop()
	select {
	case <-u.done:
	case <-time.After(5 * time.Second):
	}
}

func waitHTTPReady(ctx context.Context, url string) error {
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
