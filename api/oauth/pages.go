package oauth

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
)

//go:embed templates/*.html
var templateFiles embed.FS

// pages are the server-rendered pages, each the layout around its content.
type pages map[string]*template.Template

func parsePages() (pages, error) {
	out := pages{}
	for _, name := range []string{"login", "consent", "error"} {
		t, err := template.ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse page %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// loginPage is the data of the sign-in page.
type loginPage struct {
	Title          string
	ClientName     string
	ClientHomepage string
	Request        string // the authorization request's query string
	CSRF           string
	Email          string
	Error          string
}

// consentPage is the data of the consent page.
type consentPage struct {
	Title          string
	ClientName     string
	ClientHomepage string
	UserEmail      string
	Scopes         []scopeView
	Offline        bool
	Request        string
	CSRF           string
}

type scopeView struct{ Name, Description string }

// errorPage is the data of the error page.
type errorPage struct {
	Title   string
	Message string
}

// render writes a page with headers that keep it out of caches and frames
// and allow no script. formTarget, when not empty, is the one more place the
// page's form may send the browser to (the client's redirect URI).
func (s *Server) render(w http.ResponseWriter, status int, name string, data any, formTarget string) {
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		s.log.Error("render page", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	formAction := "'self'"
	if formTarget != "" {
		formAction += " " + formTarget
	}
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action "+formAction+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderError shows the error page.
func (s *Server) renderError(w http.ResponseWriter, status int, title, message string) {
	s.render(w, status, "error", errorPage{Title: title, Message: message}, "")
}

// cspSource is the CSP source of a redirect URI: its origin, or its scheme
// for a private-scheme URI.
func cspSource(redirect *url.URL) string {
	if redirect == nil {
		return ""
	}
	if redirect.Host == "" {
		return redirect.Scheme + ":"
	}
	// A CSP source must not hold quotes, semicolons or spaces; a registered
	// URI never does, but say it plainly.
	if strings.ContainsAny(redirect.Host, "'; ") {
		return ""
	}
	return redirect.Scheme + "://" + redirect.Host
}
