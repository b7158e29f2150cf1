package notify_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"iam/notify"
	"iam/notify/smtptest"
)

// pngPixel is a 1x1 PNG.
var pngPixel, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

func startSMTP(t *testing.T, opts smtptest.Options) *smtptest.Server {
	t.Helper()
	srv, err := smtptest.Start(opts)
	if err != nil {
		t.Fatalf("start SMTP server: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv
}

func newMailer(t *testing.T, srv *smtptest.Server, mode notify.TLSMode, user, pass string) *notify.SMTPMailer {
	t.Helper()
	m, err := notify.NewSMTPMailer(notify.SMTPConfig{
		Host: srv.Host, Port: srv.Port, TLS: mode, RootCAs: srv.CAs,
		Username: user, Password: notify.Secret(pass),
		From: "IAM <iam@example.com>", Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}

// part is one leaf of a parsed MIME tree.
type part struct {
	contentType string
	header      map[string][]string
	body        []byte
}

// walk parses a MIME entity into its leaves, checking the nesting types on the way.
func walk(t *testing.T, header map[string][]string, body io.Reader, path []string, out *[]part, shapes *[]string) {
	t.Helper()
	ct := first(header["Content-Type"])
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		t.Fatalf("content type %q: %v", ct, err)
	}
	if strings.HasPrefix(mt, "multipart/") {
		*shapes = append(*shapes, strings.Join(append(path, mt), ">"))
		r := multipart.NewReader(body, params["boundary"])
		for {
			p, perr := r.NextRawPart()
			if errors.Is(perr, io.EOF) {
				return
			}
			if perr != nil {
				t.Fatalf("next part: %v", perr)
			}
			walk(t, p.Header, p, append(path, mt), out, shapes)
		}
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	data := raw
	switch strings.ToLower(first(header["Content-Transfer-Encoding"])) {
	case "base64":
		data, err = base64.StdEncoding.DecodeString(strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' {
				return -1
			}
			return r
		}, string(raw)))
		if err != nil {
			t.Fatalf("base64 part: %v", err)
		}
	case "quoted-printable":
		data, err = io.ReadAll(newQP(raw))
		if err != nil {
			t.Fatalf("quoted-printable part: %v", err)
		}
	}
	*out = append(*out, part{contentType: mt, header: header, body: data})
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func TestSMTPMailer_DeliversMIME(t *testing.T) {
	for _, tc := range []struct {
		mode       notify.TLSMode
		user, pass string
	}{
		{mode: notify.TLSNone},
		{mode: notify.TLSStartTLS, user: "mailer", pass: "s3cret"},
		{mode: notify.TLSImplicit, user: "mailer", pass: "s3cret"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			srv := startSMTP(t, smtptest.Options{TLS: string(tc.mode), Username: tc.user, Password: tc.pass})
			m := newMailer(t, srv, tc.mode, tc.user, tc.pass)
			html := `<p>Hello <b>Ann &amp; Bob</b></p><img src="data:image/png;base64,` +
				base64.StdEncoding.EncodeToString(pngPixel) + `"><img src="cid:logo@iam">`
			err := m.Send(context.Background(), &notify.Message{
				To: []string{"ann@example.com"}, Cc: []string{"boss@example.com"},
				Subject:     "Enrol now — Ünïcode",
				HTML:        html,
				Severity:    notify.SeverityHigh,
				Inline:      []notify.File{{Name: "logo.png", ContentType: "image/png", ContentID: "logo@iam", Data: pngPixel}},
				Attachments: []notify.File{{Name: "guide.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.4 guide")}},
				MessageID:   "delivery-42@iam",
				Headers:     map[string]string{"X-Iam-Delivery": "42"},
			})
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			msgs := srv.Messages()
			if len(msgs) != 1 {
				t.Fatalf("server got %d messages, want 1", len(msgs))
			}
			got := msgs[0]
			if got.From != "iam@example.com" || strings.Join(got.To, ",") != "ann@example.com,boss@example.com" {
				t.Errorf("envelope from %q to %v", got.From, got.To)
			}
			parsed, err := mail.ReadMessage(bytes.NewReader(got.Data))
			if err != nil {
				t.Fatalf("parse message: %v", err)
			}
			h := parsed.Header
			subject, err := new(mime.WordDecoder).DecodeHeader(h.Get("Subject"))
			if err != nil || subject != "Enrol now — Ünïcode" {
				t.Errorf("Subject = %q (%v)", subject, err)
			}
			for k, want := range map[string]string{
				"To": "<ann@example.com>", "Cc": "<boss@example.com>", "Message-Id": "<delivery-42@iam>",
				"X-Priority": "1 (Highest)", "Importance": "high", "Priority": "urgent", "X-Iam-Delivery": "42",
			} {
				if got := h.Get(k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if from, _ := mail.ParseAddress(h.Get("From")); from == nil || from.Address != "iam@example.com" || from.Name != "IAM" {
				t.Errorf("From = %q", h.Get("From"))
			}

			var leaves []part
			var shapes []string
			walk(t, parsed.Header, parsed.Body, nil, &leaves, &shapes)
			wantShapes := "multipart/mixed|multipart/mixed>multipart/related|multipart/mixed>multipart/related>multipart/alternative"
			if strings.Join(shapes, "|") != wantShapes {
				t.Errorf("MIME structure %v, want %s", shapes, wantShapes)
			}
			byType := map[string][]part{}
			for _, p := range leaves {
				byType[p.contentType] = append(byType[p.contentType], p)
			}
			if ps := byType["text/plain"]; len(ps) != 1 || !strings.Contains(string(ps[0].body), "Hello Ann & Bob") {
				t.Errorf("text part = %q", ps)
			}
			htmlParts := byType["text/html"]
			if len(htmlParts) != 1 {
				t.Fatalf("%d HTML parts", len(htmlParts))
			}
			body := string(htmlParts[0].body)
			if strings.Contains(body, "data:") || !strings.Contains(body, `src="cid:inline-1@iam"`) || !strings.Contains(body, `src="cid:logo@iam"`) {
				t.Errorf("HTML part = %s", body)
			}
			images := byType["image/png"]
			if len(images) != 2 {
				t.Fatalf("%d inline images, want 2", len(images))
			}
			cids := map[string]bool{}
			for _, img := range images {
				cids[first(img.header["Content-Id"])] = true
				if !bytes.Equal(img.body, pngPixel) {
					t.Errorf("inline image bytes differ")
				}
			}
			if !cids["<logo@iam>"] || !cids["<inline-1@iam>"] {
				t.Errorf("inline content ids = %v", cids)
			}
			pdf := byType["application/pdf"]
			if len(pdf) != 1 || string(pdf[0].body) != "%PDF-1.4 guide" {
				t.Fatalf("attachment = %v", pdf)
			}
			if disp := first(pdf[0].header["Content-Disposition"]); !strings.HasPrefix(disp, "attachment") || !strings.Contains(disp, "guide.pdf") {
				t.Errorf("attachment disposition %q", disp)
			}
		})
	}
}

func TestSMTPMailer_SeverityHeaders(t *testing.T) {
	srv := startSMTP(t, smtptest.Options{})
	m := newMailer(t, srv, notify.TLSNone, "", "")
	for sev, want := range map[notify.Severity]string{notify.SeverityLow: "5 (Lowest)", notify.SeverityMedium: "3 (Normal)", notify.SeverityHigh: "1 (Highest)"} {
		if err := m.Send(context.Background(), &notify.Message{To: []string{"a@example.com"}, Subject: string(sev), Text: "plain only", Severity: sev}); err != nil {
			t.Fatal(err)
		}
		msgs := srv.Messages()
		parsed, err := mail.ReadMessage(bytes.NewReader(msgs[len(msgs)-1].Data))
		if err != nil {
			t.Fatal(err)
		}
		if got := parsed.Header.Get("X-Priority"); got != want {
			t.Errorf("%s: X-Priority %q, want %q", sev, got, want)
		}
		if mt, _, _ := mime.ParseMediaType(parsed.Header.Get("Content-Type")); mt != "text/plain" {
			t.Errorf("a text-only message is %s", mt)
		}
	}
}

func TestSMTPMailer_ClassifiesFailures(t *testing.T) {
	var mode string
	var mu sync.Mutex
	srv := startSMTP(t, smtptest.Options{OnData: func(_ smtptest.Message, c *smtp.Conn) error {
		mu.Lock()
		defer mu.Unlock()
		switch mode {
		case "reject":
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
		case "defer":
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}
		case "vanish":
			// The message is complete but no answer comes.
			if err := c.Close(); err != nil {
				t.Errorf("dropping the connection: %v", err)
			}
			return errors.New("gone")
		}
		return nil
	}})
	m := newMailer(t, srv, notify.TLSNone, "", "")
	for _, tc := range []struct {
		mode string
		want notify.Class
	}{{"reject", notify.Permanent}, {"defer", notify.Temporary}, {"vanish", notify.Uncertain}, {"", 0}} {
		mu.Lock()
		mode = tc.mode
		mu.Unlock()
		err := m.Send(context.Background(), &notify.Message{To: []string{"a@example.com"}, Subject: "x", Text: "y"})
		if got := notify.Classify(err); got != tc.want {
			t.Errorf("%q: class %v (%v), want %v", tc.mode, got, err, tc.want)
		}
	}
	if err := m.Send(context.Background(), &notify.Message{To: []string{"not an address"}, Subject: "x", Text: "y"}); notify.Classify(err) != notify.Permanent {
		t.Errorf("a bad address gives %v", err)
	}
	if got := srv.Count(); got != 1 {
		t.Errorf("server accepted %d messages, want 1", got)
	}
}

func TestSMTPMailer_ReplacesStaleConnection(t *testing.T) {
	var mu sync.Mutex
	var conns []*smtp.Conn
	srv := startSMTP(t, smtptest.Options{OnData: func(_ smtptest.Message, c *smtp.Conn) error {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
		return nil
	}})
	m := newMailer(t, srv, notify.TLSNone, "", "")
	send := func() error {
		return m.Send(context.Background(), &notify.Message{To: []string{"a@example.com"}, Subject: "x", Text: "y"})
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	err := conns[0].Close() // the server drops the pooled connection
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := send(); err != nil {
		t.Fatalf("send over a dropped pooled connection: %v", err)
	}
	if srv.Count() != 2 || srv.Sessions() != 2 {
		t.Errorf("count %d sessions %d, want 2 and 2", srv.Count(), srv.Sessions())
	}
}

func TestSMTPMailer_PoolsConnections(t *testing.T) {
	srv := startSMTP(t, smtptest.Options{Discard: true})
	m, err := notify.NewSMTPMailer(notify.SMTPConfig{Host: srv.Host, Port: srv.Port, TLS: notify.TLSNone, From: "iam@example.com", MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- m.Send(context.Background(), &notify.Message{To: []string{fmt.Sprintf("u%d@example.com", i)}, Subject: "x", Text: "y"})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if srv.Count() != 200 || srv.Sessions() > 3 {
		t.Errorf("count %d over %d connections; want 200 over at most 3", srv.Count(), srv.Sessions())
	}
}

func TestSMTPConfig_Checks(t *testing.T) {
	for _, cfg := range []notify.SMTPConfig{
		{From: "a@example.com"},
		{Host: "h", From: "nobody"},
		{Host: "h", From: "a@example.com", TLS: "ssl"},
		{Host: "h", From: "a@example.com", Auth: "kerberos", Username: "u"},
		{Host: "h", From: "a@example.com", Password: "p"},
	} {
		if _, err := notify.NewSMTPMailer(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		} else if strings.Contains(err.Error(), "p\"") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}
