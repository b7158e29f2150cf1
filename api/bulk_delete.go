package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/listing"
)

// maxBulkIDs caps the ids of one bulk delete.
const maxBulkIDs = 1000

// bulkResult is one item of a bulk delete response (spec 4.0 item 6).
type bulkResult struct {
	ResourceID string       `json:"resource_id"`
	Status     int          `json:"status"`
	Error      *ErrorDetail `json:"error,omitempty"`
}

// bulkIDs reads the required query parameter ids: comma-separated ids, at
// most maxBulkIDs. Each item is kept as written, in order, once.
func bulkIDs(c *gin.Context) ([]string, error) {
	vs := c.Request.URL.Query()["ids"]
	switch {
	case len(vs) == 0 || strings.TrimSpace(strings.Join(vs, "")) == "":
		return nil, &listing.ParamError{Param: "ids", Detail: "is required: comma-separated ids"}
	case len(vs) > 1:
		return nil, &listing.ParamError{Param: "ids", Detail: "is given more than once"}
	}
	var out []string
	seen := map[string]bool{}
	for _, raw := range strings.Split(vs[0], ",") {
		id := strings.TrimSpace(raw)
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, id)
	}
	if len(out) > maxBulkIDs {
		return nil, &listing.ParamError{Param: "ids", Detail: "holds more than 1000 ids"}
	}
	return out, nil
}

// bulkDelete answers DELETE /<resources>?ids=…: every existing id of the
// caller's organization is deleted in one transaction by deleteMany; the
// answer is 200 with one item per id, 204 when deleted and 404 with
// notFound's error when missing (or not an id).
func (s *Server) bulkDelete(c *gin.Context, notFound error, deleteMany func(ctx context.Context, orgID int64, ids []int64) ([]int64, error)) error {
	ctx := c.Request.Context()
	raw, err := bulkIDs(c)
	if err != nil {
		return err
	}
	var ids []int64
	parsed := make([]int64, len(raw)) // 0: not an id
	for i, r := range raw {
		if id, parseErr := models.ParseID("ids", r); parseErr == nil {
			parsed[i] = id
			ids = append(ids, id)
		}
	}
	deleted, err := deleteMany(ctx, principal(c).OrgID, ids)
	if err != nil {
		return err
	}
	gone := make(map[int64]bool, len(deleted))
	for _, id := range deleted {
		gone[id] = true
	}
	missing := toAPIError(notFound).Body
	out := make([]bulkResult, len(raw))
	for i, r := range raw {
		out[i] = bulkResult{ResourceID: r, Status: http.StatusNoContent}
		if !gone[parsed[i]] {
			out[i].Status, out[i].Error = http.StatusNotFound, &missing
		}
	}
	c.JSON(http.StatusOK, out)
	return nil
}
