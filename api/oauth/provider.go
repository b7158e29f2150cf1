package oauth

import (
	"context"
	"errors"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/pkce"
	"github.com/ory/fosite/token/hmac"

	"iam/models/identity"
	"iam/models/oauthstore"
)

// newProvider composes fosite for the service: the authorization code grant
// with PKCE (S256 only, required for public clients), the service's own
// refresh grant (refresh.go), the client credentials grant of service
// clients (client_credentials.go), and introspection of HMAC access tokens.
func newProvider(cfg Config, k keys, store *storage, users *identity.UserStore) (*fosite.Fosite, oauth2.CoreStrategy) {
	fc := &fosite.Config{
		AuthorizeCodeLifespan: cfg.AuthorizeCodeLifespan,
		AccessTokenLifespan:   cfg.AccessTokenLifespan,
		// Refresh tokens live until revoked (spec 5, rule 3).
		RefreshTokenLifespan: -1,
		// Refresh tokens only for access_type=offline.
		RefreshTokenScopes:             []string{offlineScope},
		GlobalSecret:                   k.tokenHMAC,
		ScopeStrategy:                  scopeStrategy,
		AudienceMatchingStrategy:       fosite.DefaultAudienceMatchingStrategy,
		EnforcePKCEForPublicClients:    true,
		EnablePKCEPlainChallengeMethod: false,
		// The redirect carries code, state, location and accounts-server.
		OmitRedirectScopeParam: true,
		ClientSecretsHasher:    secretHasher{},
		TokenURL:               cfg.Issuer + tokenPath,
	}
	strategy := oauth2.NewHMACSHAStrategyUnPrefixed(&hmac.HMACStrategy{Config: fc}, fc)
	code := &oauth2.AuthorizeExplicitGrantHandler{
		AccessTokenStrategy:    strategy,
		RefreshTokenStrategy:   strategy,
		AuthorizeCodeStrategy:  strategy,
		CoreStorage:            store,
		TokenRevocationStorage: store,
		Config:                 fc,
	}
	challenge := &pkce.Handler{AuthorizeCodeStrategy: strategy, Storage: store, Config: fc}
	refresh := &refreshHandler{strategy: strategy, store: store, users: users, lifespan: cfg.AccessTokenLifespan}
	clientCredentials := clientCredentialsHandler{&oauth2.ClientCredentialsGrantHandler{
		HandleHelper: &oauth2.HandleHelper{AccessTokenStrategy: strategy, AccessTokenStorage: store, Config: fc},
		Config:       fc,
	}}

	// The code handler must come before the PKCE handler in both lists.
	fc.AuthorizeEndpointHandlers.Append(code)
	fc.AuthorizeEndpointHandlers.Append(challenge)
	fc.TokenEndpointHandlers.Append(code)
	fc.TokenEndpointHandlers.Append(challenge)
	fc.TokenEndpointHandlers.Append(refresh)
	fc.TokenEndpointHandlers.Append(clientCredentials)
	fc.TokenIntrospectionHandlers.Append(&oauth2.CoreValidator{CoreStrategy: strategy, CoreStorage: store, Config: fc})
	return fosite.NewOAuth2Provider(store, fc), strategy
}

// secretHasher checks client secrets against their stored SHA-256
// (models.HashClientSecret), in constant time.
type secretHasher struct{}

var errSecretMismatch = errors.New("the client secret is wrong")

// Compare implements fosite.Hasher.
func (secretHasher) Compare(_ context.Context, hash, secret []byte) error {
	if !oauthstore.ClientSecretMatches(string(hash), string(secret)) {
		return errSecretMismatch
	}
	return nil
}

// Hash implements fosite.Hasher.
func (secretHasher) Hash(_ context.Context, secret []byte) ([]byte, error) {
	return []byte(oauthstore.HashClientSecret(string(secret))), nil
}
