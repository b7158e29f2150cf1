package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"

	"iam/models/audit"
	"iam/models/identity"
	"iam/models/oauthstore"
	"iam/models/protection"
	"iam/models/store"
)

// The endpoints (spec 5) and the metadata document (RFC 8414).
const (
	authPath     = "/oauth/v2/auth"
	loginPath    = "/oauth/v2/login"
	consentPath  = "/oauth/v2/consent"
	tokenPath    = "/oauth/v2/token" //nolint:gosec // a URL path, not a credential
	revokePath   = "/oauth/v2/token/revoke"
	metadataPath = "/.well-known/oauth-authorization-server"
)

// formLimit bounds the body of every form post, in bytes.
const formLimit = 64 << 10

// Deps are the Server's collaborators.
type Deps struct {
	Store *store.Store
	Log   *slog.Logger
}

// Server is the authorization server. It is safe for concurrent use.
type Server struct {
	cfg      Config
	keys     keys
	log      *slog.Logger
	provider *fosite.Fosite
	strategy oauth2.CoreStrategy
	tokens   *storage
	clients  *oauthstore.ClientStore
	users    *identity.UserStore
	settings *protection.SettingsStore
	// refusals records refused sign-ins (oauth.signin.failed).
	refusals *audit.RefusalLog
	// userStates caches the state of tokens' users (userstate.go).
	userStates *userStates
	pages      pages
	tokenLim   *limiter
	loginLim   *limiter
	mux        *http.ServeMux
}

// New builds the authorization server. It fails on an invalid Config.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if deps.Store == nil {
		return nil, fmt.Errorf("oauth: a store is required")
	}
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	k, err := deriveKeys(cfg.Secret)
	if err != nil {
		return nil, err
	}
	pg, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		keys:     k,
		log:      deps.Log.With("component", "oauth"),
		tokens:   &storage{tokens: deps.Store.OAuthTokens, clients: deps.Store.OAuthClients},
		clients:  deps.Store.OAuthClients,
		users:    deps.Store.Users,
		settings: deps.Store.Settings,
		refusals: deps.Store.Refusals,
		pages:    pg,
		tokenLim: newLimiter(cfg.TokenRate),
		loginLim: newLimiter(cfg.LoginRate),
	}
	if s.userStates, err = newUserStates(cfg.UserStateTTL, s.users); err != nil {
		return nil, err
	}
	s.provider, s.strategy = newProvider(cfg, k, s.tokens, s.users)
	s.mux = http.NewServeMux()
	for _, e := range endpoints {
		s.mux.HandleFunc(e.method+" "+e.path, e.handler(s))
	}
	s.mux.HandleFunc("/", s.notFound)
	return s, nil
}

// endpoints are the server's routes: one method each (a GET serves HEAD
// too, as http.ServeMux does).
var endpoints = []struct {
	method, path string
	handler      func(*Server) http.HandlerFunc
}{
	{"GET", authPath, func(s *Server) http.HandlerFunc { return s.authorize }},
	{"POST", loginPath, func(s *Server) http.HandlerFunc { return s.login }},
	{"POST", consentPath, func(s *Server) http.HandlerFunc { return s.consent }},
	{"POST", tokenPath, func(s *Server) http.HandlerFunc { return s.token }},
	{"POST", revokePath, func(s *Server) http.HandlerFunc { return s.revoke }},
	{"GET", metadataPath, func(s *Server) http.HandlerFunc { return s.metadata }},
}

// allowed returns the Allow header of an endpoint's path, "" for a path
// that is none.
func allowed(path string) string {
	for _, e := range endpoints {
		if e.path == path {
			if e.method == http.MethodGet {
				return "GET, HEAD"
			}
			return e.method
		}
	}
	return ""
}

// Handler serves /oauth/v2/... and the metadata document.
func (s *Server) Handler() http.Handler { return s.mux }

// Issuer is the server's public base URL.
func (s *Server) Issuer() string { return s.cfg.Issuer }

// notFound answers what no endpoint serves: 405 with Allow for an
// endpoint's path with another method, 404 otherwise.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if allow := allowed(r.URL.Path); allow != "" {
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, oauthError{Error: "method_not_allowed", Description: r.URL.Path + " accepts " + allow + ", not " + r.Method})
		return
	}
	writeJSON(w, http.StatusNotFound, oauthError{Error: "not_found", Description: "no OAuth endpoint " + r.Method + " " + r.URL.Path})
}

// oauthError is RFC 6749's error body (section 5.2).
type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// limited answers 429 with Retry-After and returns true when the client of
// r is over lim. html chooses the page over the JSON error body.
func (s *Server) limited(w http.ResponseWriter, r *http.Request, lim *limiter, html bool) bool {
	wait := lim.wait(clientKey(r, s.cfg.TrustedProxies), s.cfg.Now())
	if wait == 0 {
		return false
	}
	w.Header().Set("Retry-After", retryAfter(wait))
	msg := fmt.Sprintf("Too many requests from your address; retry after %s seconds.", retryAfter(wait))
	if html {
		s.renderError(w, http.StatusTooManyRequests, "Too many attempts", msg)
	} else {
		writeJSON(w, http.StatusTooManyRequests, oauthError{Error: "slow_down", Description: msg})
	}
	return true
}

// logRFCError logs the server errors among OAuth errors, with their debug
// text; client mistakes are not logged.
func (s *Server) logRFCError(ctx context.Context, msg string, err error) {
	rfc := fosite.ErrorToRFC6749Error(err)
	if rfc.CodeField >= 500 {
		s.log.ErrorContext(ctx, msg, "error", rfc.ErrorField, "debug", rfc.DebugField, "cause", fmt.Sprint(rfc.Cause()))
	}
}

// PurgeExpired deletes codes and access tokens that expired more than a day
// ago (a used code is kept that long to catch its reuse). It returns how many.
func (s *Server) PurgeExpired(ctx context.Context) (int64, error) {
	return s.tokens.tokens.PurgeExpired(ctx, s.cfg.Now().Add(-24*time.Hour))
}
