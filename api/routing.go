package api

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"iam/models/listing"
)

// fixedPaths maps each /api/v1 path without parameters to the methods it
// serves (server.go builds it from Routes).
type fixedPaths map[string][]string

func newFixedPaths(prefix string, routes []Route) fixedPaths {
	fp := fixedPaths{}
	for _, rt := range routes {
		if !strings.ContainsAny(rt.Path, ":*") {
			fp[prefix+rt.Path] = append(fp[prefix+rt.Path], rt.Method)
		}
	}
	return fp
}

// methodNotAllowed answers 405 with Allow. A fixed path's Allow is its own
// methods, not those of a parameter route its last segment also matches
// (GET /conditional-access-policies/evaluate is no policy).
func (fp fixedPaths) methodNotAllowed(c *gin.Context) {
	if allow, ok := fp[c.Request.URL.Path]; ok {
		c.Header("Allow", strings.Join(allow, ", "))
	}
	abortWithError(c, newAPIError(http.StatusMethodNotAllowed, CodeRouteNotFound, "Method Not Allowed", "the route does not accept "+c.Request.Method))
}

// win makes fixed paths win over parameter routes: a request the router
// gave to a parameter route (GET /conditional-access-policies/:policy_id)
// whose path is a fixed path (…/evaluate) is answered 405 with the fixed
// path's methods, never read as an id.
func (fp fixedPaths) win() gin.HandlerFunc {
	return func(c *gin.Context) {
		if strings.Contains(c.FullPath(), "/:") {
			if _, ok := fp[c.Request.URL.Path]; ok {
				fp.methodNotAllowed(c)
				return
			}
		}
		c.Next()
	}
}

// noEmptyQuery refuses a query parameter given without a value (`limit=`,
// `include=`, `?from`): 400 Invalid Parameter naming it, as any invalid
// value, for every route in one place, rather than read as absent by the
// route's parser.
func noEmptyQuery() gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.URL.RawQuery == "" {
			c.Next()
			return
		}
		q := c.Request.URL.Query()
		for _, name := range slices.Sorted(maps.Keys(q)) {
			for _, v := range q[name] {
				if strings.TrimSpace(v) == "" {
					abortWithError(c, &listing.ParamError{Param: name, Detail: "is empty: give it a value or leave it out"})
					return
				}
			}
		}
		c.Next()
	}
}
