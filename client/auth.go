package client

import (
	"context"
	"fmt"
	"net/http"

	"golang.org/x/oauth2"
)

// AuthScheme is the Authorization scheme of /api/v1 (auth.Scheme in api/auth): the
// header is "Service-oauthtoken <access token>".
const AuthScheme = "Service-oauthtoken"

// WithServiceToken sends token with every request.
func WithServiceToken(token string) ClientOption {
	return WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", AuthScheme+" "+token)
		return nil
	})
}

// WithTokenSource sends the access token of ts with every request; ts
// refreshes it when it expires (oauth2.Config.TokenSource with a refresh
// token, for one).
func WithTokenSource(ts oauth2.TokenSource) ClientOption {
	return WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		tok, err := ts.Token()
		if err != nil {
			return fmt.Errorf("access token: %w", err)
		}
		req.Header.Set("Authorization", AuthScheme+" "+tok.AccessToken)
		return nil
	})
}
