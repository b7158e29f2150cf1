package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ory/fosite"

	"iam/models"
	"iam/models/identity"
	"iam/models/oauthstore"
)

// authRequest is a checked authorization request.
type authRequest struct {
	ar      fosite.AuthorizeRequester
	client  *oauthstore.OAuthClient
	raw     string // the query string, carried by the forms
	offline bool
}

// parseAuthorize checks an authorization request given as its query string:
// fosite's checks, then the service's rules. On error, the returned request
// is not nil when the error may be sent to the client's redirect URI, and nil
// when the browser must see it instead (unknown client, redirect URI not
// registered).
func (s *Server) parseAuthorize(ctx context.Context, rawQuery string) (*authRequest, error) {
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fosite.ErrInvalidRequest.WithHint("The query string is malformed.")
	}
	// Scopes come comma-separated (spec 5) or space-separated (RFC 6749);
	// fosite reads spaces. access_type=offline asks for a refresh token.
	scopes := ParseScopes(query.Get("scope"))
	offline := query.Get("access_type") == "offline" || slices.Contains(scopes, offlineScope)
	if offline && !slices.Contains(scopes, offlineScope) {
		scopes = append(scopes, offlineScope)
	}
	norm := cloneValues(query)
	norm.Set("scope", strings.Join(scopes, " "))
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, authPath+"?"+norm.Encode(), nil)
	if err != nil {
		return nil, fosite.ErrInvalidRequest.WithHint("The request is malformed.")
	}
	ar, err := s.provider.NewAuthorizeRequest(ctx, hr)
	// state is optional (spec 5), but fosite wants at least 8 characters. Its
	// state check comes last, after every other check passed: a short or
	// missing state is accepted as it is.
	if err != nil && errors.Is(err, fosite.ErrInvalidState) && len(query.Get("state")) < fosite.MinParameterEntropy {
		err = nil
	}
	req := &authRequest{ar: ar, raw: rawQuery, offline: offline}
	if client, ok := ar.GetClient().(fositeClient); ok {
		req.client = client.OAuthClient
	}
	if req.client == nil || !ar.IsRedirectURIValid() || !slices.Contains(req.client.RedirectURIs, query.Get("redirect_uri")) {
		// The redirect URI must equal a registered one (spec 5), exactly;
		// fosite would also take a loopback URI on another port.
		if err == nil {
			err = fosite.ErrInvalidRequest.WithHint("The redirect_uri parameter is missing or does not equal a redirect URI registered for the client.")
		}
		return nil, err
	}
	if err != nil {
		return req, err
	}
	switch query.Get("access_type") {
	case "", "online", "offline":
	default:
		return req, fosite.ErrInvalidRequest.WithHint("The access_type parameter must be online or offline.")
	}
	// Public clients (browser, mobile) must prove the code is theirs: PKCE
	// with S256. fosite checks it only once the code is issued; asking here
	// spares the user a sign-in that cannot succeed.
	if req.client.Type.Public() && (query.Get("code_challenge") == "" || query.Get("code_challenge_method") != "S256") {
		return req, fosite.ErrInvalidRequest.WithHint("This client must use PKCE: send code_challenge with code_challenge_method=S256.")
	}
	if len(withoutOffline(ar.GetRequestedScopes())) == 0 {
		return req, fosite.ErrInvalidScope.WithHint("Ask for at least one scope, for example scope=svc.user.READ.")
	}
	return req, nil
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// authorizeFailed answers a request that parseAuthorize refused: to the
// client's redirect URI when it may, with the error page otherwise.
func (s *Server) authorizeFailed(w http.ResponseWriter, r *http.Request, req *authRequest, err error) {
	if s.unavailablePage(r.Context(), w, err) {
		return
	}
	s.logRFCError(r.Context(), "authorization request failed", err)
	if req != nil {
		s.provider.WriteAuthorizeError(r.Context(), w, req.ar, err)
		return
	}
	rfc := fosite.ErrorToRFC6749Error(err)
	s.renderError(w, rfc.CodeField, "This sign-in request is not valid", rfc.GetDescription())
}

// authorize is GET /oauth/v2/auth (spec 5, step 1). A browser that has not
// signed in to the client's organization gets the sign-in page; one that
// has, the consent page, or access_denied when the user may grant nothing.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	req, err := s.parseAuthorize(r.Context(), r.URL.RawQuery)
	if err != nil {
		s.authorizeFailed(w, r, req, err)
		return
	}
	user, ok, err := s.signedInUser(w, r, req.client.OrgID)
	if s.unavailablePage(r.Context(), w, err) {
		return
	}
	if !ok {
		s.renderLogin(w, r, req, http.StatusOK, "", "")
		return
	}
	if refusal := grantRefusal(user, req.ar.GetRequestedScopes(), s.cfg.Now()); refusal != nil {
		s.provider.WriteAuthorizeError(r.Context(), w, req.ar, refusal)
		return
	}
	s.renderConsent(w, r, req, user)
}

// signedInUser returns the user the browser signed in as, when still there.
// A sign-in of a user gone, inactive or blocked, or made before the user's
// tokens were revoked (a password change, say), is forgotten; one whose user
// could not be read (an unavailable store) is kept, and the error returned.
func (s *Server) signedInUser(w http.ResponseWriter, r *http.Request, orgID int64) (*identity.User, bool, error) {
	in, ok := s.signedIn(r, orgID)
	if !ok {
		return nil, false, nil
	}
	user, err := s.users.Get(r.Context(), orgID, in.UserID)
	if models.IsUnavailable(err) {
		return nil, false, err
	}
	if err != nil {
		if models.ErrorCode(err) != models.ENOTFOUND {
			s.log.ErrorContext(r.Context(), "read signed-in user", "error", err)
		}
		s.clearSignIn(w)
		return nil, false, nil
	}
	if user.Status != identity.UserActive || (user.BlockedUntil != nil && s.cfg.Now().Before(*user.BlockedUntil)) ||
		revokedSince(user, time.UnixMilli(in.Issued)) {
		s.clearSignIn(w)
		return nil, false, nil
	}
	return user, true, nil
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, req *authRequest, status int, email, msg string) {
	s.render(w, status, "login", loginPage{
		Title:          "Sign in",
		ClientName:     req.client.Name,
		ClientHomepage: req.client.HomepageURL,
		Request:        req.raw,
		CSRF:           s.csrfToken(w, r),
		Email:          email,
		Error:          msg,
	}, "")
}

func (s *Server) renderConsent(w http.ResponseWriter, r *http.Request, req *authRequest, user *identity.User) {
	var scopes []scopeView
	for _, sc := range withoutOffline(req.ar.GetRequestedScopes()) {
		scopes = append(scopes, scopeView{Name: sc, Description: describeScope(sc)})
	}
	s.render(w, http.StatusOK, "consent", consentPage{
		Title:          "Allow access",
		ClientName:     req.client.Name,
		ClientHomepage: req.client.HomepageURL,
		UserEmail:      user.Email,
		Scopes:         scopes,
		Offline:        req.offline,
		Request:        req.raw,
		CSRF:           s.csrfToken(w, r),
	}, cspSource(req.ar.GetRedirectURI()))
}

// consent is POST /oauth/v2/consent: the user allows or denies the request.
// Allowing grants every requested scope (the user is an admin) and sends the
// browser to the client with the code, state, location and accounts-server;
// denying sends error=access_denied.
func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	if !s.readForm(w, r) {
		return
	}
	req, err := s.parseAuthorize(r.Context(), r.PostForm.Get("request"))
	if err != nil {
		s.authorizeFailed(w, r, req, err)
		return
	}
	user, ok, err := s.signedInUser(w, r, req.client.OrgID)
	if s.unavailablePage(r.Context(), w, err) {
		return
	}
	if !ok {
		s.renderLogin(w, r, req, http.StatusOK, "", "Your sign-in has expired. Sign in again.")
		return
	}
	if r.PostForm.Get("decision") != "allow" {
		s.provider.WriteAuthorizeError(r.Context(), w, req.ar, fosite.ErrAccessDenied.WithHint("The user denied the request."))
		return
	}
	if refusal := grantRefusal(user, req.ar.GetRequestedScopes(), s.cfg.Now()); refusal != nil {
		s.provider.WriteAuthorizeError(r.Context(), w, req.ar, refusal)
		return
	}
	for _, scope := range req.ar.GetRequestedScopes() {
		req.ar.GrantScope(scope)
	}
	resp, err := s.provider.NewAuthorizeResponse(r.Context(), req.ar, newSession(user))
	if s.unavailablePage(r.Context(), w, err) {
		return
	}
	if err != nil {
		s.logRFCError(r.Context(), "issue authorization code", err)
		s.provider.WriteAuthorizeError(r.Context(), w, req.ar, err)
		return
	}
	params := resp.GetParameters()
	params.Set("location", s.cfg.Location)
	params.Set("accounts-server", s.cfg.Issuer)
	if req.ar.GetState() == "" {
		params.Del("state")
	}
	s.provider.WriteAuthorizeResponse(r.Context(), w, req.ar, resp)
}

// readForm parses a posted page form (bounded in size) and checks its CSRF
// value. It answers the request itself and returns false on failure.
func (s *Server) readForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, formLimit)
	if err := r.ParseForm(); err != nil {
		s.renderError(w, http.StatusBadRequest, "The form could not be read", "The form is malformed or too large.")
		return false
	}
	if !csrfOK(r) {
		s.renderError(w, http.StatusForbidden, "The form has expired",
			"The page was open too long or cookies are blocked. Go back to the application and start again; this page needs cookies.")
		return false
	}
	return true
}
