package api

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// The access log writes a line per request at info, but a quiet route's
// successful requests (device check-ins) at debug; its refusals stay at info.
func TestAccessLog_QuietRoutesLogSuccessAtDebug(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(requestID(log), accessLog())
	r.GET("/loud", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.GET("/quiet", quiet(), func(c *gin.Context) { c.Status(http.StatusOK) })
	r.GET("/quiet-refused", quiet(), func(c *gin.Context) { c.Status(http.StatusUnauthorized) })
	for _, c := range []struct {
		path string
		line bool
	}{{"/loud", true}, {"/quiet", false}, {"/quiet-refused", true}} {
		out.Reset()
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", c.path, nil))
		if got := strings.Contains(out.String(), `"msg":"request"`); got != c.line {
			t.Errorf("GET %s at info: access line %v, want %v (%q)", c.path, got, c.line, out.String())
		}
	}
}
