package api

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
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

func newFactorConfigView(c *models.FactorConfig) factorConfigView {
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
	views := make([]factorConfigView, len(configs))
	for i := range configs {
		views[i] = newFactorConfigView(&configs[i])
	}
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
	var configs []models.FactorConfig
	if err == nil {
		configs, err = s.store.Factors.Resolve(ctx, principal(c).OrgID, ids)
	}
	if err != nil {
		return asParamError(err)
	}
	header := []string{models.ColumnPrimaryEmail}
	example := []string{"jane.doe@example.com"}
	seen := map[string]bool{}
	for _, cfg := range configs {
		spec, _ := models.SpecOf(cfg.Type)
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

// enrollJobAccepted is the job response of the upload routes (spec 4.4).
type enrollJobAccepted struct {
	Data  enrollJobData  `json:"data"`
	Links enrollJobLinks `json:"links"`
}

type enrollJobData struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

type enrollJobLinks struct {
	Status struct {
		Href string `json:"href"`
	} `json:"status"`
}

// acceptJob launches a committed job and answers 202 with the job response
// and its Location. When the workflow engine cannot be reached the job
// stays QUEUED and the reconciler starts it later.
func (s *Server) acceptJob(c *gin.Context, job *models.Job, what string) {
	id := models.FormatID(job.ID)
	resp := enrollJobAccepted{Data: enrollJobData{ID: id, Status: string(models.JobRunning),
		Message: fmt.Sprintf("%s accepted; follow the job at /jobs/%s", what, id)}}
	// The job is committed: start it even if the client goes away, and do
	// not keep the client waiting long when Temporal is unreachable.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 5*time.Second)
	defer cancel()
	if err := s.startEnrollmentJob(ctx, job); err != nil {
		logger(c).Warn("job start deferred to the reconciler", "job_id", job.ID, "error", err)
		resp.Data.Status = string(models.JobQueued)
		resp.Data.Message = fmt.Sprintf("%s accepted; the job starts as soon as the workflow engine is reachable (/jobs/%s)", what, id)
	}
	resp.Links.Status.Href = "/jobs/" + id
	c.Header("Location", "/api/v1/jobs/"+id)
	c.JSON(http.StatusAccepted, resp)
}

// asParamError turns a rule broken by a query parameter into 00000107
// Invalid Parameter; other errors pass.
func asParamError(err error) error {
	var me *models.Error
	if errors.As(err, &me) && me.Code == models.EINVALID {
		return newAPIError(http.StatusBadRequest, CodeInvalidParameter, "Invalid Parameter", me.Field+": "+me.Detail)
	}
	return err
}

// startEnrollmentJob starts a job's workflow; without a workflow engine configured the
// job stays QUEUED for the reconciler.
func (s *Server) startEnrollmentJob(ctx context.Context, job *models.Job) error {
	if s.deps.Jobs == nil || s.deps.Jobs.Client == nil {
		return errors.New("no workflow engine is configured")
	}
	return s.deps.Jobs.Launch(ctx, job)
}
