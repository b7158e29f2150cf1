package oauth

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"iam/models"
)

// login is POST /oauth/v2/login: an identity user signs in with email and
// password to the organization of the requesting client. Failures count
// toward the organization's account blocking settings (spec 2.12). On
// success the browser goes back to the authorization request, now signed in.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.limited(w, r, s.loginLim, true) {
		return
	}
	if !s.readForm(w, r) {
		return
	}
	req, err := s.parseAuthorize(r.Context(), r.PostForm.Get("request"))
	if err != nil {
		s.authorizeFailed(w, r, req, err)
		return
	}
	org := req.client.OrgID
	email := strings.TrimSpace(r.PostForm.Get("email"))
	settings, err := s.settings.Get(r.Context(), org)
	if models.IsUnavailable(err) {
		s.loginUnavailable(w, r, req, email, err)
		return
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "read account blocking settings", "org_id", org, "error", err)
		s.renderError(w, http.StatusInternalServerError, "Something went wrong", "Sign-in is not available right now; try again later.")
		return
	}
	user, err := s.users.Authenticate(r.Context(), org, email, r.PostForm.Get("password"), settings.AccountBlocking, s.cfg.Now())
	if models.IsUnavailable(err) {
		s.loginUnavailable(w, r, req, email, err)
		return
	}
	if err != nil {
		status, msg := loginFailure(err)
		if status >= 500 {
			s.log.ErrorContext(r.Context(), "sign-in failed", "org_id", org, "error", err)
		}
		s.renderLogin(w, r, req, status, email, msg)
		return
	}
	s.setSignIn(w, user.ID, org)
	http.Redirect(w, r, authPath+"?"+req.raw, http.StatusSeeOther)
}

// loginFailure is the status and message the sign-in page shows for an
// Authenticate error. It never says whether the email exists, except that a
// blocked account says so.
func loginFailure(err error) (int, string) {
	var blocked *models.AccountBlockedError
	switch {
	case errors.As(err, &blocked) && blocked.Forever():
		return http.StatusForbidden, "Too many failed sign-ins: this account is blocked until an administrator unblocks it."
	case errors.As(err, &blocked):
		return http.StatusForbidden, "Too many failed sign-ins: this account is blocked until " +
			blocked.Until.UTC().Format(time.RFC1123) + ". Try again then."
	case models.ErrorCode(err) == models.EUNAUTHORIZED:
		return http.StatusUnauthorized, "The email or password is wrong."
	case models.ErrorCode(err) == models.EFORBIDDEN:
		return http.StatusForbidden, "This account is inactive. Ask an administrator to activate it."
	}
	return http.StatusInternalServerError, "Sign-in is not available right now; try again later."
}

// loginUnavailable shows the sign-in form again, 503 with Retry-After, when
// the store could not be asked: the attempt is neither a success nor a
// failure (nothing was counted), and the user may simply send it again.
func (s *Server) loginUnavailable(w http.ResponseWriter, r *http.Request, req *authRequest, email string, err error) {
	s.log.WarnContext(r.Context(), "sign-in not checked: the store is unavailable", "org_id", req.client.OrgID, "cause", storeCause(err))
	setRetryAfter(w)
	s.renderLogin(w, r, req, http.StatusServiceUnavailable, email, unavailableMessage)
}
