package api

import (
	"strings"

	"github.com/gin-gonic/gin"

	"iam/models"
)

// syncNow: POST /device-account-linking/sync-now. A job (module Devices)
// applies the current account-linking settings to every unlinked local
// account; 202 with the job response of spec 4.4. While a sync of the
// organization is queued or running, the answer is that job (two
// concurrent requests make one job). 409 when account linking is off.
func (s *Server) syncNow(c *gin.Context) error {
	p := principal(c)
	job, created, err := s.store.Devices.StartSync(c.Request.Context(), p.OrgID, p.UserID)
	if err != nil {
		return err
	}
	if created {
		s.acceptJob(c, job, "the account-linking sync")
		return nil
	}
	writeJobAccepted(c, job, job.Status,
		"a sync is already "+strings.ToLower(string(job.Status))+"; follow it at /jobs/"+models.FormatID(job.ID))
	return nil
}
