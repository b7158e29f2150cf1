package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"iam/models/enrollment"
)

// logonScriptPut is the body of PUT logon-script-config: the whole
// configuration (spec 2.14).
type logonScriptPut struct {
	WindowTitle        string `json:"window_title" validate:"required,max=200"`
	WindowContent      string `json:"window_content" validate:"required,max=4000"`
	EnrollmentButton   string `json:"enrollment_button" validate:"required,max=60"`
	CancellationButton string `json:"cancellation_button" validate:"required,max=60"`
	ForceEnrollment    string `json:"force_enrollment" validate:"required,oneof=true false"`
}

// logonScriptPatch is the body of PATCH logon-script-config: any subset.
type logonScriptPatch struct {
	WindowTitle        *string `json:"window_title" validate:"omitnil,min=1,max=200"`
	WindowContent      *string `json:"window_content" validate:"omitnil,min=1,max=4000"`
	EnrollmentButton   *string `json:"enrollment_button" validate:"omitnil,min=1,max=60"`
	CancellationButton *string `json:"cancellation_button" validate:"omitnil,min=1,max=60"`
	ForceEnrollment    *string `json:"force_enrollment" validate:"omitnil,oneof=true false"`
}

// getLogonScript: GET /protection/quick-enrollment/logon-script-config.
func (s *Server) getLogonScript(c *gin.Context) error {
	ctx := c.Request.Context()
	cfg, err := s.store.LogonScript.Get(ctx, principal(c).OrgID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": cfg})
	return nil
}

// putLogonScript: PUT, replaces the whole configuration.
func (s *Server) putLogonScript(c *gin.Context) error {
	ctx := c.Request.Context()
	var body logonScriptPut
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	cfg, err := s.store.LogonScript.Update(ctx, principal(c).OrgID, func(cfg *enrollment.LogonScriptConfig) error {
		cfg.WindowTitle, cfg.WindowContent = body.WindowTitle, body.WindowContent
		cfg.EnrollmentButton, cfg.CancellationButton = body.EnrollmentButton, body.CancellationButton
		cfg.ForceEnrollment = body.ForceEnrollment
		return nil
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": cfg})
	return nil
}

// patchLogonScript: PATCH, changes the fields given.
func (s *Server) patchLogonScript(c *gin.Context) error {
	ctx := c.Request.Context()
	var body logonScriptPatch
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	cfg, err := s.store.LogonScript.Update(ctx, principal(c).OrgID, func(cfg *enrollment.LogonScriptConfig) error {
		for _, f := range []struct {
			src *string
			dst *string
		}{
			{body.WindowTitle, &cfg.WindowTitle}, {body.WindowContent, &cfg.WindowContent},
			{body.EnrollmentButton, &cfg.EnrollmentButton}, {body.CancellationButton, &cfg.CancellationButton},
			{body.ForceEnrollment, &cfg.ForceEnrollment},
		} {
			if f.src != nil {
				*f.dst = *f.src
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": cfg})
	return nil
}
