// Package oauth is the service's OAuth 2.0 authorization server (spec 5),
// built on github.com/ory/fosite:
//
//   - GET /oauth/v2/auth: the authorization request; shows the sign-in page,
//     then the consent page (server-rendered, CSRF-protected, no JavaScript),
//     and sends the browser back to the client with a code, or with
//     error=access_denied;
//   - POST /oauth/v2/login and /oauth/v2/consent: the two forms;
//   - POST /oauth/v2/token: authorization_code and refresh_token grants,
//     and client_credentials for service clients (a token of the client's
//     own, without a user, accepted by /scim/v2 only); parameters in the
//     query string or a form body;
//   - POST /oauth/v2/token/revoke: revokes a refresh token and the access
//     tokens made from it;
//   - GET /.well-known/oauth-authorization-server: RFC 8414 metadata.
//
// Tokens are opaque HMAC-SHA512/256 values; only their signatures are
// stored (storage.go, over models.OAuthTokenStore). The Server also validates access tokens for
// the /api/v1 routes (auth.TokenValidator) and issues tokens directly for the
// self client (`iam token`).
package oauth
