package api

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestHandler_RequestContextIsNotReused: a handler's gin context, which
// handlers pass to the database as a context.Context (and database/sql reads
// from its own goroutine, possibly after the handler returned), still belongs
// to its request after later requests: the server does not recycle it.
func TestHandler_RequestContextIsNotReused(t *testing.T) {
	s := New(Config{}, Deps{Log: slog.New(slog.DiscardHandler)})
	kept := make(chan *gin.Context, 1)
	s.engine.GET("/test/keep/:n", func(c *gin.Context) {
		if c.Param("n") == "1" {
			kept <- c
		}
		c.Status(http.StatusNoContent)
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	for _, n := range []string{"1", "2", "3", "4"} {
		resp, err := http.Get(srv.URL + "/test/keep/" + n)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	c := <-kept
	if got := c.Request.URL.Path; got != "/test/keep/1" {
		t.Errorf("the first request's context now carries %s: it was reused", got)
	}
}
