package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"iam/models/listing"
)

// writeList answers a list: the page's items projected onto fields (the
// request's fields parameter; every field when empty) as data, and the
// page's meta.
func writeList[T any](c *gin.Context, items []T, fields []string, meta listing.Meta) {
	c.JSON(http.StatusOK, gin.H{"data": listing.Project(items, fields), "meta": meta})
}

// viewsOf maps a page of records to their views, view(&items[i]) each.
func viewsOf[T, V any](items []T, view func(*T) V) []V {
	out := make([]V, len(items))
	for i := range items {
		out[i] = view(&items[i])
	}
	return out
}
