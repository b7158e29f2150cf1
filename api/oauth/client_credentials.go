package oauth

import (
	"context"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"

	"iam/models/oauthstore"
)

// clientCredentialsHandler is the client_credentials grant (RFC 6749
// section 4.4) for service clients: a client authenticated with its secret
// (client_secret_basic or client_secret_post) gets an access token for
// itself, of its organization and no user, holding the scopes it asked for
// when its registration allows them (scopeStrategy; all of its registered
// scopes when it asked for none). No refresh token: the client asks again.
// Any other client is refused with unauthorized_client. It wraps fosite's
// handler, which checks the scopes, sets the expiry and stores the token
// (oauth.token.issued, the client its actor, as token.go arranges).
type clientCredentialsHandler struct {
	*oauth2.ClientCredentialsGrantHandler
}

var _ fosite.TokenEndpointHandler = clientCredentialsHandler{}

// HandleTokenEndpointRequest implements fosite.TokenEndpointHandler.
func (h clientCredentialsHandler) HandleTokenEndpointRequest(ctx context.Context, req fosite.AccessRequester) error {
	if !h.CanHandleTokenEndpointRequest(ctx, req) {
		return fosite.ErrUnknownRequest
	}
	client, ok := req.GetClient().(fositeClient)
	if !ok || client.Type != oauthstore.ClientService {
		return fosite.ErrUnauthorizedClient.WithHint("Only a service client may use the client_credentials grant.")
	}
	if len(req.GetRequestedScopes()) == 0 {
		req.SetRequestedScopes(client.Scopes)
	}
	if err := h.ClientCredentialsGrantHandler.HandleTokenEndpointRequest(ctx, req); err != nil {
		return err
	}
	sess, ok := req.GetSession().(*Session)
	if !ok {
		return fosite.ErrServerError.WithDebugf("the request's session is %T, not the service's", req.GetSession())
	}
	sess.UserID = 0
	sess.OrgID = client.OrgID
	sess.AuthTime = time.Now().UTC()
	for _, scope := range req.GetRequestedScopes() {
		req.GrantScope(scope)
	}
	return nil
}
