package api

import (
	"encoding/csv"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/enrollment"
)

// factorConfigView is an authentication factor config as the API shows it.
type factorConfigView struct {
	ID          string   `json:"id"`
	FactorType  string   `json:"factor_type"`
	DisplayName string   `json:"display_name"`
	IsEnabled   bool     `json:"is_enabled"`
	CSVColumns  []string `json:"csv_columns"`
	CreatedTime string   `json:"created_time"`
}

func newFactorConfigView(c *enrollment.FactorConfig) factorConfigView {
	return factorConfigView{
		ID:          models.FormatID(c.ID),
		FactorType:  string(c.Type),
		DisplayName: c.DisplayName,
		IsEnabled:   c.IsEnabled,
		CSVColumns:  c.Columns(),
		CreatedTime: c.CreatedAt.UTC().Format(time.RFC3339),
	}
}

// listFactorConfigs: GET /protection/authnfactor-configs, the organization's
// factor configs (seeded on first use), each with the CSV columns its
// enrollment data needs.
func (s *Server) listFactorConfigs(c *gin.Context) error {
	ctx := c.Request.Context()
	configs, err := s.store.Factors.List(ctx, principal(c).OrgID)
	if err != nil {
		return err
	}
	views := viewsOf(configs, newFactorConfigView)
	c.JSON(http.StatusOK, gin.H{"data": views, "meta": gin.H{"start_index": 0, "limit": len(views), "total_no_of_objects": len(views)}})
	return nil
}

// sampleCSV: GET /protection/quick-enrollment/sample-csv?factor_configs=…,
// a CSV with the header the chosen configs need and one example row.
func (s *Server) sampleCSV(c *gin.Context) error {
	ctx := c.Request.Context()
	ids, err := parseIDList("factor_configs", c.QueryArray("factor_configs"))
	if err == nil && len(ids) == 0 {
		err = models.Invalid("factor_configs", "is required: comma-separated factor config ids")
	}
	var configs []enrollment.FactorConfig
	if err == nil {
		configs, err = s.store.Factors.Resolve(ctx, principal(c).OrgID, ids)
	}
	if err != nil {
		return asParamError(err)
	}
	header := []string{enrollment.ColumnPrimaryEmail}
	example := []string{"jane.doe@example.com"}
	seen := map[string]bool{}
	for _, cfg := range configs {
		spec, _ := enrollment.SpecOf(cfg.Type)
		for i, col := range spec.Columns {
			if !seen[col] {
				seen[col] = true
				header = append(header, col)
				example = append(example, spec.Examples[i])
			}
		}
	}
	var b strings.Builder
	w := csv.NewWriter(&b)
	_ = w.Write(header)
	_ = w.Write(example)
	w.Flush()
	c.Header("Content-Disposition", `attachment; filename="quick-enrollment-sample.csv"`)
	c.Data(http.StatusOK, "text/csv; charset=utf-8", []byte(b.String()))
	return nil
}

// parseIDList reads ids given as repeated values, comma-separated values or
// a JSON array ([1,2] or ["1","2"]).
func parseIDList(field string, values []string) ([]int64, error) {
	var ids []int64
	for _, v := range values {
		v = strings.TrimSpace(v)
		v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
		for _, part := range strings.Split(v, ",") {
			part = strings.Trim(strings.TrimSpace(part), `"`)
			if part == "" {
				continue
			}
			id, err := models.ParseID(field, part)
			if err != nil {
				return nil, models.Invalid(field, "%q is not a factor config id", part)
			}
			ids = append(ids, id)
		}
	}
	return ids, nil
}
