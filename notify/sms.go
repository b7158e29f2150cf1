package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// SMS is one text message.
type SMS struct {
	To   string // the number, E.164 preferred (+14155550100)
	Body string
	// Reference identifies the delivery (stable across retries); gateways
	// that deduplicate may use it.
	Reference string
}

// SMSGateway sends text messages. Send returns nil once the gateway
// accepted the message, and otherwise an error Classify sorts. It is safe
// for concurrent use.
type SMSGateway interface {
	SendSMS(ctx context.Context, m SMS) error
}

// HTTPRetry is how the HTTP gateways retry an answer that says "try
// again": HTTP 429, 502, 503 and 504, and 500. A connection that could not
// be opened is retried too. A request whose answer never came (a timeout
// after it was sent) is never retried: the message may have gone.
type HTTPRetry struct {
	// Attempts is the most requests made for one message; 3 when zero.
	Attempts int
	// Wait is the pause before the first retry, doubled after each; 500 ms
	// when zero. A Retry-After answer header overrides it, up to MaxWait.
	Wait, MaxWait time.Duration
}

func (r HTTPRetry) withDefaults() HTTPRetry {
	if r.Attempts <= 0 {
		r.Attempts = 3
	}
	if r.Wait <= 0 {
		r.Wait = 500 * time.Millisecond
	}
	if r.MaxWait <= 0 {
		r.MaxWait = 30 * time.Second
	}
	return r
}

// retryableStatus reports whether an HTTP status asks for a later try.
func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500
}

// postWithRetry sends the request newReq makes until it is accepted (2xx),
// refused for good (other 4xx), or the attempts run out. It returns the
// accepted response's body.
func postWithRetry(ctx context.Context, hc *http.Client, retry HTTPRetry, newReq func(context.Context) (*http.Request, error)) ([]byte, error) {
	retry = retry.withDefaults()
	wait := retry.Wait
	var last error
	for attempt := 1; ; attempt++ {
		req, err := newReq(ctx)
		if err != nil {
			return nil, permanent(0, err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			if sentBeforeFailure(err) {
				return nil, uncertain(0, err)
			}
			last = temporary(0, err)
		} else {
			body, readErr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close() // read: a failed close loses nothing
			switch {
			case resp.StatusCode >= 200 && resp.StatusCode < 300:
				if readErr != nil { // accepted; the body is only a receipt
					return nil, nil
				}
				return body, nil
			case retryableStatus(resp.StatusCode):
				last = temporary(resp.StatusCode, fmt.Errorf("gateway answered %s: %s", resp.Status, snippet(body)))
				if ra := retryAfter(resp.Header.Get("Retry-After")); ra > 0 {
					wait = min(ra, retry.MaxWait)
				}
			default:
				return nil, permanent(resp.StatusCode, fmt.Errorf("gateway answered %s: %s", resp.Status, snippet(body)))
			}
		}
		if attempt >= retry.Attempts {
			return nil, last
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, temporary(0, ctx.Err())
		case <-t.C:
		}
		wait = min(wait*2, retry.MaxWait)
	}
}

// sentBeforeFailure reports whether a failed request may have reached the
// server: anything but a failure to connect.
func sentBeforeFailure(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	var dnsErr *net.DNSError
	return !errors.As(err, &dnsErr)
}

func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

func snippet(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
