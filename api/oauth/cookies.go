package oauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// The pages' cookies, both HttpOnly, SameSite=Lax, scoped to /oauth/v2 and
// Secure when the issuer is https:
//   - csrfCookie holds a random value every form repeats in csrf_token
//     (double submit);
//   - loginCookie says who signed in, for which organization, until when,
//     signed with a key derived from the global secret.
const (
	csrfCookie  = "iam_csrf"
	loginCookie = "iam_login"
	cookiePath  = "/oauth/v2"
	csrfField   = "csrf_token"
)

var b64 = base64.RawURLEncoding

func (s *Server) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
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
	payload, _ := json.Marshal(signIn{UserID: userID, OrgID: orgID, Expires: s.cfg.Now().Add(s.cfg.LoginLifespan).Unix(), Issued: time.Now().UnixMilli()})
	value := b64.EncodeToString(payload) + "." + b64.EncodeToString(s.sign(payload))
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
	data, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return in, false
	}
	payload, err1 := b64.DecodeString(data)
	mac, err2 := b64.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.sign(payload)) {
		return in, false
	}
	if err := json.Unmarshal(payload, &in); err != nil {
		return in, false
	}
	if in.OrgID != orgID || s.cfg.Now().Unix() >= in.Expires || in.UserID <= 0 {
		return in, false
	}
	return in, true
}

func (s *Server) sign(payload []byte) []byte {
	m := hmac.New(sha256.New, s.keys.login)
	m.Write(payload)
	return m.Sum(nil)
}
