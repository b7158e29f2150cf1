// Package oauthstore is the OAuth area: the clients registered with the
// authorization server and the HMAC signatures of its codes and tokens.
package oauthstore
