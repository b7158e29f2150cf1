package oauth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"iam/api/auth"
	"iam/models"
	"iam/models/audit"
	"iam/models/identity"
	"iam/models/oauthstore"
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
		} else {
			s.log.InfoContext(r.Context(), "sign-in refused", "org_id", org, "reason", err.Error())
			s.signInFailed(r.Context(), req.client, err)
		}
		s.renderLogin(w, r, req, status, email, msg)
		return
	}
	s.setSignIn(w, user.ID, org)
	http.Redirect(w, r, authPath+"?"+req.raw, http.StatusSeeOther) //nolint:gosec // a redirect to this server's own authorization path
}

// signInFailed records oauth.signin.failed for a refused sign-in through
// the client's form: a refusal (store.Refusals: outside any transaction,
// rate-bounded), FAILURE with the refusal's class as its reason (unknown
// email, wrong password, blocked, inactive). It names the user the email
// belongs to, when one does, as actor and first target (by its own name or
// email, never the text typed), then the client. Nothing else the user
// typed appears: an unknown email is not written, a password never.
func (s *Server) signInFailed(ctx context.Context, client *oauthstore.OAuthClient, err error) {
	var refusal *identity.SignInRefusal
	if !errors.As(err, &refusal) {
		return
	}
	ev := models.AuditEvent{OrgID: client.OrgID, Type: audit.OAuthSigninFailed, Result: models.ResultFailure, Reason: refusal.Reason}
	actor := models.Actor{Type: models.ActorUser, DisplayName: "unknown user"}
	if refusal.User != nil {
		target := identity.UserTarget(refusal.User)
		ev.Targets = append(ev.Targets, target)
		actor = models.Actor{Type: models.ActorUser, ID: target.ID, DisplayName: target.DisplayName}
	}
	ev.Targets = append(ev.Targets, models.EventTarget{Type: oauthstore.ClientTargetType, ID: client.ID, DisplayName: client.Name})
	if err := s.refusals.Record(withActor(ctx, actor), ev); err != nil {
		s.log.WarnContext(ctx, "record a refused sign-in", "org_id", client.OrgID, "error", err)
	}
}

// signInRefused is the sign-in page's one answer to every refused sign-in:
// an unknown email, a wrong password, a blocked account (whatever the
// password) and an inactive one (even with the right password) look alike,
// so that the page tells neither whether an account exists nor whether a
// password is right. The reason is logged.
const signInRefused = "The email or password is wrong, or this account cannot sign in right now. " +
	"After repeated failures an account is blocked for a while; ask an administrator if this goes on."

// loginFailure is the status and message the sign-in page shows for an
// Authenticate error: signInRefused for every refusal.
func loginFailure(err error) (int, string) {
	var blocked *identity.AccountBlockedError
	switch {
	case errors.As(err, &blocked),
		models.ErrorCode(err) == models.EUNAUTHORIZED,
		models.ErrorCode(err) == models.EFORBIDDEN:
		return http.StatusUnauthorized, signInRefused
	}
	return http.StatusInternalServerError, "Sign-in is not available right now; try again later."
}

// loginUnavailable shows the sign-in form again, 503 with Retry-After, when
// the store could not be asked: the attempt is neither a success nor a
// failure (nothing was counted), and the user may simply send it again.
func (s *Server) loginUnavailable(w http.ResponseWriter, r *http.Request, req *authRequest, email string, err error) {
	s.log.WarnContext(r.Context(), "sign-in not checked: the store is unavailable", "org_id", req.client.OrgID, "cause", storeCause(err))
	auth.SetRetryAfter(w.Header())
	s.renderLogin(w, r, req, http.StatusServiceUnavailable, email, unavailableMessage)
}
