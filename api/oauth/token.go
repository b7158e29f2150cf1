package oauth

import (
	"net/http"
	"strings"
	"time"

	"github.com/ory/fosite"

	"iam/models"
)

// TokenResponse is the token endpoint's answer (spec 5, steps 2 and 3), and
// what `iam token` prints. RefreshToken is there for access_type=offline
// only; Scope is space-separated (RFC 6749 section 5.1).
type TokenResponse struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token,omitempty"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope,omitempty"`
}

// tokenType is the token_type of every answer; the token is nevertheless
// sent to the API as "Service-oauthtoken <token>" (spec 5, rule 4).
const tokenType = "Bearer"

func (s *Server) tokenResponse(access, refresh string, scopes []string) TokenResponse {
	return TokenResponse{
		AccessToken:  access,
		RefreshToken: refresh,
		TokenType:    tokenType,
		ExpiresIn:    int64(s.cfg.AccessTokenLifespan / time.Second),
		Scope:        strings.Join(withoutOffline(scopes), " "),
	}
}

// token is POST /oauth/v2/token: the authorization_code grant (a code works
// once, within its lifespan, with the redirect_uri it was issued for; its
// reuse revokes what it produced), the refresh_token grant, and the
// client_credentials grant of service clients (client_credentials.go: an
// access token of the client's own, no refresh token). Parameters are
// read from the query string (as the interface shows them) and from a form
// body; a body value wins. Errors have RFC 6749's JSON shape.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if s.limited(w, r, s.tokenLim, false) {
		return
	}
	ctx := r.Context()
	if err := mergeQueryIntoForm(w, r); err != nil {
		s.writeAccessError(ctx, w, nil, err)
		return
	}
	// The client is the actor of the tokens' events: fosite authenticates
	// the client the request names before any change (a reused code's
	// revocation happens in NewAccessRequest), and the events of the new
	// tokens name it as it is registered.
	claimed := claimedClient(r)
	ctx = withActor(ctx, models.Actor{Type: models.ActorClient, ID: claimed, DisplayName: claimed})
	ar, err := s.provider.NewAccessRequest(ctx, r, new(Session))
	if err != nil {
		s.logRFCError(ctx, "token request failed", err)
		s.writeAccessError(ctx, w, ar, err)
		return
	}
	ctx = asClient(ctx, ar.GetClient())
	resp, err := s.provider.NewAccessResponse(ctx, ar)
	if err != nil {
		s.logRFCError(ctx, "token response failed", err)
		s.writeAccessError(ctx, w, ar, err)
		return
	}
	refresh, _ := resp.GetExtra("refresh_token").(string)
	writeJSON(w, http.StatusOK, s.tokenResponse(resp.GetAccessToken(), refresh, ar.GetGrantedScopes()))
}

// mergeQueryIntoForm parses r's form body (bounded in size) and adds the
// query parameters it does not hold, so that fosite, which reads the body
// only, sees both.
func mergeQueryIntoForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, formLimit)
	if err := r.ParseForm(); err != nil {
		return fosite.ErrInvalidRequest.WithHint("The request body could not be read as a form.")
	}
	for k, vs := range r.URL.Query() {
		if _, ok := r.PostForm[k]; !ok {
			r.PostForm[k] = vs
		}
	}
	return nil
}
