package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/jobs"
)

// Every job, of every kind, is written QUEUED in the transaction that holds
// its input; the handler starts its workflow after the commit with startJob,
// the one way the API starts a job. A start that fails leaves the job QUEUED
// and the reconciler (api/jobrun) starts it later: the job is accepted
// either way. Routes whose answer is the job itself answer with acceptJob.

// jobStartTimeout is how long a request waits for its job's start when the
// workflow engine is slow or unreachable.
const jobStartTimeout = 5 * time.Second

// startJob starts the workflow of a committed QUEUED job and reports whether
// it started. The start goes on if the client goes away (the job is
// committed), but keeps the client waiting at most jobStartTimeout. When no
// workflow engine is configured or it cannot be reached, the failure is
// logged and the job left to the reconciler.
func (s *Server) startJob(c *gin.Context, job *jobs.Job) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), jobStartTimeout)
	defer cancel()
	err := errors.New("no workflow engine is configured")
	if s.deps.Jobs != nil && s.deps.Jobs.Client != nil {
		err = s.deps.Jobs.Launch(ctx, job)
	}
	if err != nil {
		logger(c).Warn("job start deferred to the reconciler", "job_id", job.ID, "error", err)
		return false
	}
	return true
}

// jobAccepted is the job response of the routes that start a job (spec 4.4).
type jobAccepted struct {
	Data  jobAcceptedData  `json:"data"`
	Links jobAcceptedLinks `json:"links"`
}

type jobAcceptedData struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

type jobAcceptedLinks struct {
	Status struct {
		Href string `json:"href"`
	} `json:"status"`
}

// acceptJob starts a committed job (startJob) and answers 202 with the job
// response and its Location: RUNNING, or QUEUED when the job waits for the
// reconciler. what names what was accepted ("the file").
func (s *Server) acceptJob(c *gin.Context, job *jobs.Job, what string) {
	id := models.FormatID(job.ID)
	if s.startJob(c, job) {
		writeJobAccepted(c, job, jobs.JobRunning, fmt.Sprintf("%s accepted; follow the job at /jobs/%s", what, id))
		return
	}
	writeJobAccepted(c, job, jobs.JobQueued,
		fmt.Sprintf("%s accepted; the job starts as soon as the workflow engine is reachable (/jobs/%s)", what, id))
}

// writeJobAccepted answers 202 with the job response of job in status.
func writeJobAccepted(c *gin.Context, job *jobs.Job, status jobs.JobStatus, message string) {
	id := models.FormatID(job.ID)
	resp := jobAccepted{Data: jobAcceptedData{ID: id, Status: string(status), Message: message}}
	resp.Links.Status.Href = "/jobs/" + id
	c.Header("Location", "/api/v1/jobs/"+id)
	c.JSON(http.StatusAccepted, resp)
}
