package oauth

import (
	"encoding/json"
	"net/http"
)

// Metadata is the authorization server metadata document (RFC 8414).
type Metadata struct {
	Issuer                                 string   `json:"issuer"`
	AuthorizationEndpoint                  string   `json:"authorization_endpoint"`
	TokenEndpoint                          string   `json:"token_endpoint"`
	RevocationEndpoint                     string   `json:"revocation_endpoint"`
	ScopesSupported                        []string `json:"scopes_supported"`
	ResponseTypesSupported                 []string `json:"response_types_supported"`
	ResponseModesSupported                 []string `json:"response_modes_supported"`
	GrantTypesSupported                    []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported      []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethodsSupported []string `json:"revocation_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported          []string `json:"code_challenge_methods_supported"`
	ServiceDocumentation                   string   `json:"service_documentation"`
}

// Metadata returns the server's metadata document.
func (s *Server) Metadata() Metadata {
	authMethods := []string{"client_secret_basic", "client_secret_post", "none"}
	return Metadata{
		Issuer:                                 s.cfg.Issuer,
		AuthorizationEndpoint:                  s.cfg.Issuer + authPath,
		TokenEndpoint:                          s.cfg.Issuer + tokenPath,
		RevocationEndpoint:                     s.cfg.Issuer + revokePath,
		ScopesSupported:                        SupportedScopes(),
		ResponseTypesSupported:                 []string{"code"},
		ResponseModesSupported:                 []string{"query"},
		GrantTypesSupported:                    []string{"authorization_code", "refresh_token", "client_credentials"},
		TokenEndpointAuthMethodsSupported:      authMethods,
		RevocationEndpointAuthMethodsSupported: authMethods,
		CodeChallengeMethodsSupported:          []string{"S256"},
		ServiceDocumentation:                   s.cfg.Issuer + "/api/v1/openapi.json",
	}
}

// metadata is GET /.well-known/oauth-authorization-server.
func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.Metadata())
}
