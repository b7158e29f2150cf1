package activities

import (
	"context"
	"encoding/json"
	"errors"

	"go.temporal.io/sdk/temporal"

	"iam/models"
	"iam/models/jobs"
	"iam/models/store"
)

// Progress is a job's absolute progress.
type Progress = jobs.JobProgress

// JobInfo is what a job workflow needs to know of its job.
type JobInfo struct {
	Kind       string          `json:"kind"`
	Module     string          `json:"module"`
	ActionName string          `json:"action_name"`
	Input      json.RawMessage `json:"input"`
	Progress   Progress        `json:"progress"`
}

// FinishInput ends a job. A non-empty Failure ends it in ERROR with that
// message; otherwise the state follows from the counts in Progress.
type FinishInput struct {
	Job      jobs.JobRef `json:"job"`
	Progress Progress    `json:"progress"`
	Failure  string      `json:"failure,omitempty"`
}

// Error types of the non-retryable errors activities return.
const (
	ErrJobGone     = "JobGone"     // the job row was deleted: stop quietly
	ErrJobFinished = "JobFinished" // the job already ended
	ErrInvalid     = "Invalid"     // the job's input breaks a rule
)

// Jobs holds the activities every job workflow uses.
type Jobs struct {
	Store *store.Store
}

// StartJob marks the job RUNNING and returns what its workflow needs.
func (a *Jobs) StartJob(ctx context.Context, ref jobs.JobRef) (JobInfo, error) {
	job, err := a.Store.Jobs.Start(ctx, ref.OrgID, ref.JobID)
	if err != nil {
		return JobInfo{}, temporalError(err)
	}
	return JobInfo{
		Kind:       job.Kind,
		Module:     job.Module,
		ActionName: job.ActionName,
		Input:      job.Input,
		Progress:   job.Progress(),
	}, nil
}

// FinishJob writes the job's final state and returns it.
func (a *Jobs) FinishJob(ctx context.Context, in FinishInput) (jobs.JobStatus, error) {
	status := jobs.OutcomeStatus(in.Progress.Success, in.Progress.Failed)
	message := outcomeMessage(in.Progress)
	if in.Failure != "" {
		status, message = jobs.JobError, in.Failure
	}
	err := a.Store.Jobs.Finish(ctx, in.Job.OrgID, in.Job.JobID, status, message, in.Progress)
	if err != nil {
		return "", temporalError(err)
	}
	return status, nil
}

func outcomeMessage(p Progress) string {
	switch {
	case p.Failed == 0:
		return "all entities processed successfully"
	case p.Success == 0:
		return "no entity could be processed"
	default:
		return "some entities failed"
	}
}

// temporalError turns a domain error into one Temporal understands: rule
// breaks and missing rows are not worth retrying; anything else is.
func temporalError(err error) error {
	var e *models.Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code {
	case models.ENOTFOUND:
		return temporal.NewNonRetryableApplicationError(e.Detail, ErrJobGone, nil)
	case models.ECONFLICT:
		return temporal.NewNonRetryableApplicationError(e.Detail, ErrJobFinished, nil)
	case models.EINVALID:
		return temporal.NewNonRetryableApplicationError(e.Error(), ErrInvalid, nil)
	}
	return err
}
