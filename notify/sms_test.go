package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"iam/notify"
)

// gatewayServer answers with the statuses in order (the last one repeats)
// and records every request.
type gatewayServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*recorded
	calls    atomic.Int32
}

type recorded struct {
	path   string
	header http.Header
	body   string
}

func newGateway(t *testing.T, statuses []int, body string, hdr map[string]string) *gatewayServer {
	t.Helper()
	g := &gatewayServer{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(g.calls.Add(1))
		b, _ := io.ReadAll(r.Body)
		g.mu.Lock()
		g.requests = append(g.requests, &recorded{path: r.URL.Path, header: r.Header.Clone(), body: string(b)})
		g.mu.Unlock()
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(statuses[min(n, len(statuses))-1])
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(g.Close)
	return g
}

var fastRetry = notify.HTTPRetry{Attempts: 3, Wait: time.Millisecond, MaxWait: 5 * time.Millisecond}

func TestWebhookGateway(t *testing.T) {
	for _, tc := range []struct {
		name      string
		statuses  []int
		hdr       map[string]string
		wantCalls int32
		want      notify.Class
	}{
		{name: "accepted", statuses: []int{202}, wantCalls: 1},
		{name: "5xx then accepted", statuses: []int{503, 502, 200}, wantCalls: 3},
		{name: "429 with Retry-After", statuses: []int{429, 200}, hdr: map[string]string{"Retry-After": "0"}, wantCalls: 2},
		{name: "4xx is final", statuses: []int{400}, wantCalls: 1, want: notify.Permanent},
		{name: "401 is final", statuses: []int{401}, wantCalls: 1, want: notify.Permanent},
		{name: "5xx until the attempts run out", statuses: []int{500}, wantCalls: 3, want: notify.Temporary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newGateway(t, tc.statuses, `{"ok":true}`, tc.hdr)
			gw, err := notify.NewWebhookGateway(notify.WebhookConfig{URL: srv.URL + "/sms", Token: "tok-123", Retry: fastRetry})
			if err != nil {
				t.Fatal(err)
			}
			err = gw.SendSMS(context.Background(), notify.SMS{To: "+14155550100", Body: "Hi Ann", Reference: "d-1"})
			if got := notify.Classify(err); got != tc.want {
				t.Fatalf("class %v (%v), want %v", got, err, tc.want)
			}
			if got := srv.calls.Load(); got != tc.wantCalls {
				t.Errorf("%d requests, want %d", got, tc.wantCalls)
			}
			r := srv.requests[0]
			var body map[string]string
			if err := json.Unmarshal([]byte(r.body), &body); err != nil {
				t.Fatal(err)
			}
			if body["to"] != "+14155550100" || body["message"] != "Hi Ann" || body["reference"] != "d-1" || r.path != "/sms" {
				t.Errorf("request %s %v", r.path, body)
			}
			if r.header.Get("Authorization") != "Bearer tok-123" || r.header.Get("Idempotency-Key") != "d-1" || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("headers %v", r.header)
			}
		})
	}
}

func TestWebhookGateway_TimeoutIsUncertain(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		time.Sleep(300 * time.Millisecond)
	}))
	defer srv.Close()
	gw, err := notify.NewWebhookGateway(notify.WebhookConfig{URL: srv.URL, Timeout: 50 * time.Millisecond, Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	err = gw.SendSMS(context.Background(), notify.SMS{To: "+1", Body: "x"})
	if notify.Classify(err) != notify.Uncertain || calls.Load() != 1 {
		t.Errorf("class %v after %d requests; want uncertain after 1", notify.Classify(err), calls.Load())
	}
}

func TestWebhookGateway_UnreachableIsRetriedThenTemporary(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err = ln.Close(); err != nil { // nothing listens there now
		t.Fatal(err)
	}
	gw, err := notify.NewWebhookGateway(notify.WebhookConfig{URL: "http://" + addr + "/sms", Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.SendSMS(context.Background(), notify.SMS{To: "+1", Body: "x"}); notify.Classify(err) != notify.Temporary {
		t.Errorf("unreachable gateway: %v", err)
	}
}

func TestTwilioGateway(t *testing.T) {
	for _, tc := range []struct {
		name      string
		statuses  []int
		body      string
		wantCalls int32
		want      notify.Class
	}{
		{name: "created", statuses: []int{201}, body: `{"sid":"SM1","status":"queued"}`, wantCalls: 1},
		{name: "503 then created", statuses: []int{503, 201}, body: `{"sid":"SM1"}`, wantCalls: 2},
		{name: "invalid number", statuses: []int{400}, body: `{"code":21211,"message":"The 'To' number is not valid.","status":400}`, wantCalls: 1, want: notify.Permanent},
		{name: "server errors", statuses: []int{500}, body: `{}`, wantCalls: 3, want: notify.Temporary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newGateway(t, tc.statuses, tc.body, map[string]string{"Content-Type": "application/json"})
			gw, err := notify.NewTwilioGateway(notify.TwilioConfig{BaseURL: srv.URL, AccountSID: "AC123", AuthToken: "secret-token", From: "+15005550006", Retry: fastRetry})
			if err != nil {
				t.Fatal(err)
			}
			err = gw.SendSMS(context.Background(), notify.SMS{To: "+14155550100", Body: "Enrol: 100% secure"})
			if got := notify.Classify(err); got != tc.want {
				t.Fatalf("class %v (%v), want %v", got, err, tc.want)
			}
			if tc.want == notify.Permanent && !strings.Contains(err.Error(), "21211") {
				t.Errorf("error %v does not carry the gateway's answer", err)
			}
			if srv.calls.Load() != tc.wantCalls {
				t.Errorf("%d requests, want %d", srv.calls.Load(), tc.wantCalls)
			}
			r := srv.requests[0]
			if r.path != "/2010-04-01/Accounts/AC123/Messages.json" {
				t.Errorf("path %s", r.path)
			}
			form, _ := url.ParseQuery(r.body)
			if form.Get("To") != "+14155550100" || form.Get("From") != "+15005550006" || form.Get("Body") != "Enrol: 100% secure" {
				t.Errorf("form %v", form)
			}
			req := &http.Request{Header: r.header}
			if user, pass, ok := req.BasicAuth(); !ok || user != "AC123" || pass != "secret-token" {
				t.Errorf("basic auth %q %q %v", user, pass, ok)
			}
		})
	}
}

func TestGateways_CheckConfig(t *testing.T) {
	if _, err := notify.NewWebhookGateway(notify.WebhookConfig{URL: "ftp://x"}); err == nil {
		t.Error("ftp webhook accepted")
	}
	if _, err := notify.NewTwilioGateway(notify.TwilioConfig{AccountSID: "AC1", AuthToken: "t"}); err == nil {
		t.Error("twilio without a sender accepted")
	}
	if _, err := notify.NewTwilioGateway(notify.TwilioConfig{From: "+1", AuthToken: "t"}); err == nil {
		t.Error("twilio without an account accepted")
	}
}
