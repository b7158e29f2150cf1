package activities

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// TestHookClient_ChecksEachResolution: a hook's name is checked on what it
// resolves to at each delivery, so a name whose DNS answer changes after
// the hook was saved (or after a delivery that was allowed) to a private
// address is refused before any connection to it, and allowed again when
// the answer is an allowed one.
func TestHookClient_ChecksEachResolution(t *testing.T) {
	hits := atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	var answer atomic.Value // the A record hooks.example resolves to now
	answer.Store(netip.MustParseAddr("127.0.0.1"))
	dns := fakeDNS(t, &answer)
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", dns)
	}}
	c := newHookClient([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, 1, resolver)
	url := "http://hooks.example:" + port + "/hook"
	deliver := func() hookResult {
		defer c.CloseIdleConnections() // each delivery dials (and resolves) anew
		return send(context.Background(), c, url, "msg_1", [][]byte{[]byte("k")}, []byte("{}"), time.Now())
	}

	if r := deliver(); !r.ok() || hits.Load() != 1 {
		t.Fatalf("while hooks.example is 127.0.0.1 (allowed): %+v, %d requests", r, hits.Load())
	}
	answer.Store(netip.MustParseAddr("10.1.2.3"))
	if r := deliver(); r.ok() || !strings.HasPrefix(r.err, "refused") || hits.Load() != 1 {
		t.Fatalf("after hooks.example moved to 10.1.2.3: %+v, %d requests", r, hits.Load())
	}
	answer.Store(netip.MustParseAddr("169.254.169.254"))
	if r := deliver(); r.ok() || !strings.HasPrefix(r.err, "refused") {
		t.Fatalf("after hooks.example moved to the metadata address: %+v", r)
	}
	answer.Store(netip.MustParseAddr("127.0.0.1"))
	if r := deliver(); !r.ok() || hits.Load() != 2 {
		t.Fatalf("back on 127.0.0.1: %+v, %d requests", r, hits.Load())
	}
}

// fakeDNS serves, on a UDP port of 127.0.0.1, an A record of the address
// in answer for every name, and no AAAA record; it returns its address.
func fakeDNS(t *testing.T, answer *atomic.Value) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			b.EnableCompression()
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				a := answer.Load().(netip.Addr).As4()
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: a})
			}
			msg, err := b.Finish()
			if err != nil {
				continue
			}
			_, _ = pc.WriteTo(msg, from)
		}
	}()
	return pc.LocalAddr().String()
}
