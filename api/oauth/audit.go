package oauth

import (
	"context"
	"net/http"
	"net/url"

	"github.com/ory/fosite"

	"iam/models"
)

// The authorization server's audit events. Its changes record theirs in
// their transactions, in the stores: a sign-in's success
// (oauth.signin.succeeded, identity.UserStore.Authenticate, the user its
// actor) and the tokens' issue and revocation (oauth.token.issued and
// oauth.token.revoked, oauthstore.OAuthTokenStore, in fosite's transaction
// where fosite opens one), whose actor is the OAuth client. A refused
// sign-in (oauth.signin.failed) is a refusal: written by store.Refusals
// outside any transaction and rate-bounded (login.go). No event holds a
// token, a code, a secret or a password.

// asClient returns ctx whose audit Origin makes client the actor of the
// changes made with it.
func asClient(ctx context.Context, client fosite.Client) context.Context {
	name := client.GetID()
	if c, ok := client.(fositeClient); ok && c.OAuthClient != nil && c.Name != "" {
		name = c.Name
	}
	return withActor(ctx, models.Actor{Type: models.ActorClient, ID: client.GetID(), DisplayName: name})
}

// withActor returns ctx whose audit Origin names actor.
func withActor(ctx context.Context, actor models.Actor) context.Context {
	o := models.OriginOf(ctx)
	o.Actor = actor
	return models.WithOrigin(ctx, o)
}

// claimedClient is the client id a token request names: HTTP Basic's user
// (URL-decoded, RFC 6749 section 2.3.1) or the form's client_id. fosite
// authenticates it before any change the request makes.
func claimedClient(r *http.Request) string {
	if id, _, ok := r.BasicAuth(); ok {
		if dec, err := url.QueryUnescape(id); err == nil {
			return dec
		}
		return id
	}
	return r.PostForm.Get("client_id")
}
