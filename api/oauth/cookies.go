package oauth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/gorilla/securecookie"
)

// The pages' cookies, both HttpOnly, SameSite=Lax, scoped to /oauth/v2 and
// Secure when the issuer is https:
//   - csrfCookie holds a random value every form repeats in csrf_token
//     (double submit);
//   - loginCookie says who signed in, for which organization, until when,
//     signed (gorilla/securecookie, HMAC-SHA256) with a key derived from the
//     global secret.
//
// The CSRF check stays a double-submit token rather than net/http's
// CrossOriginProtection: that one lets through every request without
// Sec-Fetch-Site or Origin (older browsers, any non-browser client), while
// a posted form here must prove it came from a page the service served
// (TestLogin_CSRF posts a forged token without those headers and expects
// 403).
const (
	csrfCookie  = "iam_csrf"
	loginCookie = "iam_login"
	cookiePath  = "/oauth/v2"
	csrfField   = "csrf_token"
)

var b64 = base64.RawURLEncoding

func (s *Server) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // HttpOnly and SameSite are set; Secure follows the configuration (off only for plain-HTTP development)
		Name:     name,
		Value:    value,
		Path:     cookiePath,
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   s.cfg.secureCookies(),
		SameSite: http.SameSiteLaxMode,
	})
}

// csrfToken returns the CSRF value of the browser, setting a new one when it
// has none.
func (s *Server) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 43 {
		return c.Value
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	token := b64.EncodeToString(b[:])
	s.setCookie(w, csrfCookie, token, 0)
	return token
}

// csrfOK reports whether the posted form repeats the browser's CSRF value.
func csrfOK(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostForm.Get(csrfField))) == 1
}

// signIn is the content of the sign-in cookie.
type signIn struct {
	UserID  int64 `json:"u,string"`
	OrgID   int64 `json:"o,string"`
	Expires int64 `json:"e"` // Unix seconds
	// Issued is when the user signed in, in Unix milliseconds of the wall
	// clock: a sign-in from before the user's TokensValidAfter is over.
	Issued int64 `json:"i"`
}

// setSignIn remembers that the user signed in to the organization.
func (s *Server) setSignIn(w http.ResponseWriter, userID, orgID int64) {
	in := signIn{UserID: userID, OrgID: orgID, Expires: s.cfg.Now().Add(s.cfg.LoginLifespan).Unix(), Issued: time.Now().UnixMilli()}
	value, err := s.loginCodec().Encode(loginCookie, in)
	if err != nil {
		// A signIn always encodes; without the cookie the user signs in again.
		s.log.Error("sign-in cookie", "error", err)
		return
	}
	s.setCookie(w, loginCookie, value, int(s.cfg.LoginLifespan/time.Second))
}

// clearSignIn forgets the sign-in.
func (s *Server) clearSignIn(w http.ResponseWriter) { s.setCookie(w, loginCookie, "", -1) }

// signedIn returns the sign-in to the organization, if any and not
// expired.
func (s *Server) signedIn(r *http.Request, orgID int64) (signIn, bool) {
	var in signIn
	c, err := r.Cookie(loginCookie)
	if err != nil {
		return in, false
	}
	if err := s.loginCodec().Decode(loginCookie, c.Value, &in); err != nil {
		return signIn{}, false
	}
	if in.OrgID != orgID || s.cfg.Now().Unix() >= in.Expires || in.UserID <= 0 {
		return in, false
	}
	return in, true
}

// loginCodec signs and checks the sign-in cookie: JSON, an HMAC-SHA256 with
// the login key, and securecookie's own timestamp, refused after the sign-in
// lifespan (Expires is checked as well, against Config.Now).
func (s *Server) loginCodec() *securecookie.SecureCookie {
	return securecookie.New(s.keys.login, nil).
		SetSerializer(securecookie.JSONEncoder{}).
		MaxAge(int(s.cfg.LoginLifespan / time.Second))
}
