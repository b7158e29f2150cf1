package oauth

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// cookieServer is a Server with only what the cookies need.
func cookieServer(t *testing.T, issuer string, now *time.Time) *Server {
	t.Helper()
	k, err := deriveKeys([]byte("a secret of at least thirty-two bytes"))
	if err != nil {
		t.Fatal(err)
	}
	return &Server{keys: k, log: slog.New(slog.DiscardHandler), cfg: Config{
		Issuer: issuer, LoginLifespan: DefaultLoginLifespan, Now: func() time.Time { return *now },
	}}
}

// TestSignInCookie: the sign-in cookie names its user and organization, is
// HttpOnly, SameSite=Lax, scoped to /oauth/v2, Secure on https and lives
// for the sign-in lifespan; a changed value, another organization, another
// key and a sign-in past its lifespan are refused.
func TestSignInCookie(t *testing.T) {
	now := time.Now()
	s := cookieServer(t, "https://iam.example", &now)
	rec := httptest.NewRecorder()
	s.setSignIn(rec, 42, 7)
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies: %v", cookies)
	}
	c := cookies[0]
	if c.Name != loginCookie || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteLaxMode ||
		c.Path != cookiePath || c.MaxAge != 15*60 {
		t.Errorf("cookie attributes: %+v", c)
	}
	read := func(s *Server, value string, org int64) (signIn, bool) {
		r := httptest.NewRequest(http.MethodGet, "/oauth/v2/auth", nil)
		r.AddCookie(&http.Cookie{Name: loginCookie, Value: value}) //nolint:gosec // G124: a cookie as a request sends it; the attributes are the server's, checked above
		return s.signedIn(r, org)
	}
	if in, ok := read(s, c.Value, 7); !ok || in.UserID != 42 || in.OrgID != 7 || in.Issued == 0 {
		t.Errorf("the sign-in reads back as %+v, %v", in, ok)
	}
	if _, ok := read(s, c.Value, 8); ok {
		t.Error("a sign-in to organization 7 holds for organization 8")
	}
	i := len(c.Value) / 2
	other := "A"
	if c.Value[i] == 'A' {
		other = "B"
	}
	flipped := c.Value[:i] + other + c.Value[i+1:]
	if _, ok := read(s, flipped, 7); ok {
		t.Error("a changed cookie is accepted")
	}
	for _, forged := range []string{"", "x", `{"u":"42","o":"7","e":9999999999,"i":1}`} {
		if _, ok := read(s, forged, 7); ok {
			t.Errorf("the unsigned value %q is accepted", forged)
		}
	}
	rekeyed := cookieServer(t, "https://iam.example", &now)
	rekeyed.keys.login = []byte("another key, of thirty-two bytes")
	if _, ok := read(rekeyed, c.Value, 7); ok {
		t.Error("a cookie signed with another key is accepted")
	}
	now = now.Add(DefaultLoginLifespan)
	if _, ok := read(s, c.Value, 7); ok {
		t.Error("a sign-in past its lifespan is accepted")
	}

	plain := cookieServer(t, "http://localhost:8080", &now)
	rec = httptest.NewRecorder()
	plain.setSignIn(rec, 42, 7)
	if c := rec.Result().Cookies()[0]; c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
		t.Errorf("cookie over http: %+v", c)
	}
}
