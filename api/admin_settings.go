package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"iam/models/protection"
)

// Administrator settings (spec 2.12): GET answers the stored settings over
// the defaults; PATCH is a JSON merge patch over them (objects merge, arrays
// and other values replace), validated whole before it is stored.

const adminSettingsPath = "/protection/admin-settings"

// getAdminSettings: GET /protection/admin-settings, {data: settings}.
func (s *Server) getAdminSettings(c *gin.Context) error {
	set, err := s.store.Settings.Get(c.Request.Context(), principal(c).OrgID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": set})
	return nil
}

// patchAdminSettings: PATCH /protection/admin-settings, {data: settings}
// as stored. Account blocking applies to the next sign-in; this process's
// agents see offline MFA changes at their next check-in (other processes'
// within agentSettingsTTL).
func (s *Server) patchAdminSettings(c *gin.Context) error {
	patch, err := decodePatch(c)
	if err != nil {
		return err
	}
	orgID := principal(c).OrgID
	set, err := s.store.Settings.Update(c.Request.Context(), orgID, func(cur *protection.AdminSettings) (*protection.AdminSettings, error) {
		next := new(protection.AdminSettings)
		if mergeErr := mergeRequest(cur, patch, nil, next); mergeErr != nil {
			return nil, mergeErr
		}
		return next, nil
	})
	if err != nil {
		return err
	}
	s.agentSettings.Remove(orgID)
	c.JSON(http.StatusOK, gin.H{"data": set})
	return nil
}
