package notify_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"iam/notify"
)

func TestRender(t *testing.T) {
	values := map[string]string{"name": `<Ann & "Bob">`, "org": "Acme"}
	for _, tc := range []struct {
		in         string
		escape     bool
		want       string
		wantMacros []string
	}{
		{in: "<p>Hi %name%</p>", escape: true, want: "<p>Hi &lt;Ann &amp; &#34;Bob&#34;&gt;</p>", wantMacros: []string{"name"}},
		{in: "Hi %name%", escape: false, want: `Hi <Ann & "Bob">`, wantMacros: []string{"name"}},
		{in: "50% off at %org%, 100%", escape: true, want: "50% off at Acme, 100%", wantMacros: []string{"org"}},
		{in: "%unknown% and %org%%org%", escape: true, want: "%unknown% and AcmeAcme", wantMacros: []string{"unknown", "org"}},
		{in: "", want: ""},
		{in: "%%", want: "%%"},
	} {
		text := notify.Compile(tc.in)
		if got := text.Render(values, tc.escape); got != tc.want {
			t.Errorf("Render(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := text.Macros(); fmt.Sprint(got) != fmt.Sprint(tc.wantMacros) && len(got)+len(tc.wantMacros) > 0 {
			t.Errorf("Macros(%q) = %v, want %v", tc.in, got, tc.wantMacros)
		}
	}
	if got := notify.Wrap(`<html><body>{{body}}</body></html>`, "<p>x</p>"); got != "<html><body><p>x</p></body></html>" {
		t.Errorf("Wrap = %q", got)
	}
	if got := notify.Wrap("  ", "<p>x</p>"); got != "<p>x</p>" {
		t.Errorf("empty wrap = %q", got)
	}
}

func TestHTMLToText(t *testing.T) {
	in := `<html><head><title>T</title><style>p{}</style></head><body><h1>Welcome</h1>` +
		`<p>Hello&nbsp;<b>Ann</b> &amp; co,</p><p>Click <a href="https://x.example/e">here</a>.<br>Thanks</p>` +
		`<ul><li>one</li><li>two</li></ul><script>alert(1)</script></body></html>`
	want := "Welcome\n\nHello Ann & co,\n\nClick here (https://x.example/e).\nThanks\n\n- one\n- two"
	if got := notify.HTMLToText(in); got != want {
		t.Errorf("HTMLToText =\n%q\nwant\n%q", got, want)
	}
}

func TestParseDataURI(t *testing.T) {
	for _, tc := range []struct {
		in, ct, data string
		bad          bool
	}{
		{in: "data:image/png;base64,aGVsbG8=", ct: "image/png", data: "hello"},
		{in: "DATA:text/plain;charset=utf-8;BASE64,aGVs\nbG8", ct: "text/plain; charset=utf-8", data: "hello"},
		{in: "data:,a%20b", ct: "text/plain; charset=US-ASCII", data: "a b"},
		{in: "data:image/png;base64,!!!", bad: true},
		{in: "data:image/png;base64", bad: true},
		{in: "http://x/y.png", bad: true},
	} {
		ct, data, err := notify.ParseDataURI(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q accepted", tc.in)
			}
			continue
		}
		if err != nil || ct != tc.ct || string(data) != tc.data {
			t.Errorf("%q = %q %q %v", tc.in, ct, data, err)
		}
	}
	html, files := notify.InlineDataImages(`<img src="data:image/gif;base64,R0lG"> <img alt=x src='data:image/gif;base64,R0lG'> <img src="data:bad">`)
	if len(files) != 1 || files[0].ContentType != "image/gif" || string(files[0].Data) != "GIF" {
		t.Fatalf("files = %+v", files)
	}
	if strings.Count(html, `src="cid:inline-1@iam"`) != 2 || !strings.Contains(html, `src="data:bad"`) {
		t.Errorf("html = %s", html)
	}
}

func TestSecret_NeverShown(t *testing.T) {
	cfg := struct {
		User     string
		Password notify.Secret
	}{"u", "hunter2"}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "cfg", cfg, "pw", cfg.Password)
	j, err := json.Marshal(cfg) //nolint:gosec // G117: marshalling the secret is the point: it must come out masked
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), string(j), buf.String()} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("secret shown: %s", s)
		}
	}
	if cfg.Password.Reveal() != "hunter2" {
		t.Error("Reveal lost the secret")
	}
}
