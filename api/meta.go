package api

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"iam/models/listing"
	"iam/models/notification"
)

// templateDefaultConfigs: GET /meta/templates/notification/default_configs.
// The limits served are the ones template writes are checked against
// (models.TemplateLimits).
func (s *Server) templateDefaultConfigs(c *gin.Context) error {
	c.JSON(http.StatusOK, gin.H{"data": notification.TemplateDefaults()})
	return nil
}

// templateModuleConfigs: GET /meta/templates/notification/module_configs,
// for the module named by query module (any case), Reports when absent.
func (s *Server) templateModuleConfigs(c *gin.Context) error {
	module := c.Query("module")
	if module == "" {
		module = notification.ModuleReports
	}
	cfg, ok := notification.TemplateModuleConfigs(module)
	if !ok {
		return &listing.ParamError{Param: "module", Detail: "must be one of: " + strings.Join(notification.TemplateModuleNames(), ", ")}
	}
	c.JSON(http.StatusOK, gin.H{"data": cfg})
	return nil
}
