package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/jobs"
	"iam/models/listing"
)

// resultsInJob is how many per-entity results GET /jobs/{id} carries; the
// rest are paged through GET /jobs/{id}/results.
const resultsInJob = 100

// jobView is a job as the API shows it (spec 2.17). Progress is the
// service's addition; the list leaves out details.
type jobView struct {
	ID         string       `json:"id"`
	StartTime  time.Time    `json:"start_time"`
	EndTime    *time.Time   `json:"end_time"`
	ActionName string       `json:"action_name"`
	Status     string       `json:"status"`
	Module     string       `json:"module"`
	Message    string       `json:"message"`
	Progress   progressView `json:"progress"`
	Details    *jobDetails  `json:"details,omitempty"`
}

type progressView struct {
	Processed int64 `json:"processed"`
	Total     int64 `json:"total"`
}

// jobDetails holds the first results of a job and the counts of all of them.
type jobDetails struct {
	Entity       string           `json:"entity"`
	Result       []jobs.JobResult `json:"result"`
	SuccessCount int64            `json:"success_count"`
	ErrorCount   int64            `json:"error_count"`
	ResultCount  int64            `json:"result_count"`
	ResultsHref  string           `json:"results_href"`
}

func newJobView(j *jobs.Job) jobView {
	return jobView{
		ID:         models.FormatID(j.ID),
		StartTime:  j.StartTime.UTC(),
		EndTime:    utcPtr(j.EndTime),
		ActionName: j.ActionName,
		Status:     string(j.Status),
		Module:     j.Module,
		Message:    j.Message,
		Progress:   progressView{Processed: j.Processed, Total: j.Total},
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// listJobs: GET /jobs (offset paging; filter on module, status, action_name,
// start_time, end_time).
func (s *Server) listJobs(c *gin.Context) error {
	params, err := listing.Parse(c.Request.URL.Query(), jobs.JobListing)
	if err != nil {
		return err
	}
	// The request's context, not gin's: gin recycles its context after the
	// request while database/sql may still read it (a data race).
	jobs, meta, err := s.store.Jobs.List(c.Request.Context(), principal(c).OrgID, params)
	if err != nil {
		return err
	}
	writeList(c, viewsOf(jobs, newJobView), params.Fields, meta)
	return nil
}

// getJob: GET /jobs/{job_id}, the job at top level with its first results.
func (s *Server) getJob(c *gin.Context) error {
	ctx := c.Request.Context()
	org := principal(c).OrgID
	id, err := pathID(c, "job_id", jobs.ErrJobNotFound)
	if err != nil {
		return err
	}
	job, err := s.store.Jobs.Get(ctx, org, id)
	if err != nil {
		return err
	}
	view, err := s.fullJobView(ctx, job)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, view)
	return nil
}

// fullJobView is the job as GET /jobs/{job_id} shows it: with details, its
// first results and the counts of all of them. The event stream of
// GET /jobs/{job_id}/events sends the same.
func (s *Server) fullJobView(ctx context.Context, job *jobs.Job) (jobView, error) {
	results, err := s.store.Jobs.Results(ctx, job.ID, "", 0, resultsInJob)
	if err != nil {
		return jobView{}, err
	}
	if results == nil {
		results = []jobs.JobResult{}
	}
	view := newJobView(job)
	view.Details = &jobDetails{
		Entity:       job.Entity,
		Result:       results,
		SuccessCount: job.SuccessCount,
		ErrorCount:   job.ErrorCount,
		ResultCount:  job.SuccessCount + job.ErrorCount,
		ResultsHref:  "/api/v1/jobs/" + view.ID + "/results",
	}
	return view, nil
}

// listJobResults: GET /jobs/{job_id}/results, every per-entity result in row
// order (offset paging; filter on row, id and status); with Accept:
// text/csv all of them as a CSV file (jobs_results_csv.go).
func (s *Server) listJobResults(c *gin.Context) error {
	ctx := c.Request.Context()
	org := principal(c).OrgID
	id, err := pathID(c, "job_id", jobs.ErrJobNotFound)
	if err != nil {
		return err
	}
	if wantsCSV(c) {
		return s.jobResultsCSV(c, id)
	}
	params, err := listing.Parse(c.Request.URL.Query(), jobs.JobResultListing)
	if err != nil {
		return err
	}
	results, meta, err := s.store.Jobs.ListResults(ctx, org, id, params)
	if err != nil {
		return err
	}
	writeList(c, results, params.Fields, meta)
	return nil
}

// deleteJob: DELETE /jobs/{job_id}. The row goes first, so the job is gone
// for every reader at once; then its workflow is cancelled (a workflow that
// misses the cancel stops at its next write, finding its job gone). So the
// delete needs only the database: with the workflow engine unreachable it is
// still 204, after at most jobCancelWait, and the workflow stops once the
// engine is back.
func (s *Server) deleteJob(c *gin.Context) error {
	ctx := c.Request.Context()
	org := principal(c).OrgID
	id, err := pathID(c, "job_id", jobs.ErrJobNotFound)
	if err != nil {
		return err
	}
	if err := s.store.Jobs.Delete(ctx, org, id); err != nil {
		return err
	}
	if s.deps.Jobs == nil || s.deps.Jobs.Client == nil {
		logger(c).Warn("no workflow engine: the deleted job's workflow stops at its next write", "job_id", id)
		c.Status(http.StatusNoContent)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), jobCancelWait)
	defer cancel()
	if err := s.deps.Jobs.Cancel(ctx, id); err != nil {
		logger(c).Warn("job deleted; its workflow will stop at its next write", "job_id", id, "error", err)
	}
	c.Status(http.StatusNoContent)
	return nil
}

// jobCancelWait bounds how long DELETE /jobs/{id} waits for the workflow
// engine to take the cancel.
const jobCancelWait = 5 * time.Second
