package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/scim"
)

// provisioningTokenView is a SCIM provisioning token as /api/v1 shows it:
// never its value, but on creation (token).
type provisioningTokenView struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	// Token is the bearer token, in the creation's answer only.
	Token string `json:"token,omitempty"`
}

func newProvisioningTokenView(t *scim.ProvisioningToken) provisioningTokenView {
	return provisioningTokenView{ID: models.FormatID(t.ID), Name: t.Name, Scopes: t.ScopeList(), CreatedAt: t.CreatedAt.UTC(),
		ExpiresAt: utcPtr(t.ExpiresAt), LastUsedAt: utcPtr(t.LastUsedAt), RevokedAt: utcPtr(t.RevokedAt)}
}

// provisioningTokenRequest is the body of POST /provisioning-tokens: the
// token's name and, optionally, its life in days (without it the token
// lasts until revoked).
type provisioningTokenRequest struct {
	Name          string `json:"name" validate:"required"`
	ExpiresInDays *int   `json:"expires_in_days" validate:"omitempty,min=1,max=3650"`
}

// createProvisioningToken: POST /provisioning-tokens, 201 {data: token}
// with the token's value, shown this once.
func (s *Server) createProvisioningToken(c *gin.Context) error {
	var req provisioningTokenRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var expires *time.Time
	if req.ExpiresInDays != nil {
		e := time.Now().UTC().AddDate(0, 0, *req.ExpiresInDays)
		expires = &e
	}
	t, secret, err := s.store.ProvisioningTokens.Create(c.Request.Context(), principal(c).OrgID, req.Name, expires)
	if err != nil {
		return err
	}
	v := newProvisioningTokenView(t)
	v.Token = secret
	c.JSON(http.StatusCreated, gin.H{"data": v})
	return nil
}

// listProvisioningTokens: GET /provisioning-tokens, the organization's
// tokens (revoked ones too), newest first, with their last use.
func (s *Server) listProvisioningTokens(c *gin.Context) error {
	list, err := s.store.ProvisioningTokens.List(c.Request.Context(), principal(c).OrgID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": viewsOf(list, newProvisioningTokenView)})
	return nil
}

// revokeProvisioningToken: DELETE /provisioning-tokens/{token_id}, 204: the
// token is refused from its next request on.
func (s *Server) revokeProvisioningToken(c *gin.Context) error {
	id, err := pathID(c, "token_id", scim.ErrTokenNotFound)
	if err != nil {
		return err
	}
	if err := s.store.ProvisioningTokens.Revoke(c.Request.Context(), principal(c).OrgID, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
