package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/sqldb"
	"time"

	"github.com/uptrace/bun"
)

// JobStatus is the state of a job (spec 2.17). A job is written QUEUED with
// its input, turns RUNNING when its workflow picks it up, and ends COMPLETED
// (every entity succeeded), WARNING (some failed) or ERROR (nothing could be
// processed, or the job itself failed).
type JobStatus string

// The job states.
const (
	JobQueued    JobStatus = "QUEUED"
	JobRunning   JobStatus = "RUNNING"
	JobCompleted JobStatus = "COMPLETED"
	JobWarning   JobStatus = "WARNING"
	JobError     JobStatus = "ERROR"
)

// Finished reports whether s is a final state.
func (s JobStatus) Finished() bool {
	return s == JobCompleted || s == JobWarning || s == JobError
}

// OutcomeStatus is the final state of a job whose entities gave the counts.
func OutcomeStatus(success, failed int64) JobStatus {
	switch {
	case failed == 0:
		return JobCompleted
	case success > 0:
		return JobWarning
	default:
		return JobError
	}
}

// Job kinds: the workflow type that runs each kind of job (Job.Kind). Every
// kind is declared here; package workflows registers each workflow under
// its kind (its *WorkflowName constants are these names).
const (
	// DiagnosticJobKind is the test job of made-up items (workflows.Diagnostic).
	DiagnosticJobKind = "Diagnostic"
	// GroupRecomputeJobKind recomputes a dynamic group's members.
	GroupRecomputeJobKind = "GroupMembershipRecompute"
	// EnrollCSVJobKind and EnrollSmartCardsJobKind are the quick-enrollment
	// uploads: a CSV, a ZIP of smart-card certificates.
	EnrollCSVJobKind        = "QuickEnrollmentCSV"
	EnrollSmartCardsJobKind = "QuickEnrollmentSmartCards"
	// DeviceSyncJobKind is the account-linking sync; a partial unique index
	// lets an organization have one QUEUED or RUNNING at a time.
	DeviceSyncJobKind = "DeviceAccountSync"
	// MgmtJobKind runs a management execution's attempt.
	MgmtJobKind = "ManagementExecution"
	// MgmtResolveJobKind resolves a large management upload's rows.
	MgmtResolveJobKind = "ManagementUploadResolve"
)

// Job is the record of a background operation. The row is the truth for
// /jobs; its workflow (id "job-<id>") updates it through activities.
type Job struct {
	bun.BaseModel `bun:"table:jobs"`

	ID           int64           `bun:"id,pk"`
	OrgID        int64           `bun:"org_id"`
	Kind         string          `bun:"kind"` // the workflow type that runs it
	Module       string          `bun:"module"`
	ActionName   string          `bun:"action_name"`
	Entity       string          `bun:"entity"`
	Status       JobStatus       `bun:"status"`
	Message      string          `bun:"message"`
	Input        json.RawMessage `bun:"input,type:json"`
	Processed    int64           `bun:"processed"`
	Total        int64           `bun:"total"`
	SuccessCount int64           `bun:"success_count"`
	ErrorCount   int64           `bun:"error_count"`
	CreatedBy    int64           `bun:"created_by"`
	CreatedAt    time.Time       `bun:"created_at"`
	StartTime    time.Time       `bun:"start_time"`
	EndTime      *time.Time      `bun:"end_time"`
	UpdatedAt    time.Time       `bun:"updated_at"`
}

// WorkflowID is the id of the workflow that runs the job.
func (j *Job) WorkflowID() string { return JobWorkflowID(j.ID) }

// JobRef names a job: the workflow input every job workflow starts with. Its
// JSON travels in workflow histories ({"job": {"job_id": "1", "org_id": "2"}}):
// keep the field names.
type JobRef struct {
	JobID int64 `json:"job_id,string"`
	OrgID int64 `json:"org_id,string"`
}

// WorkflowID is the workflow id of the job.
func (r JobRef) WorkflowID() string { return JobWorkflowID(r.JobID) }

// JobWorkflowID is the workflow id of job id: "job-<id>".
func JobWorkflowID(id int64) string { return "job-" + models.FormatID(id) }

// JobResult is the outcome for one entity of a job: a row of an upload, a
// user of a selection. Seq is its position (the row number for files).
type JobResult struct {
	bun.BaseModel `bun:"table:job_results"`

	JobID    int64  `bun:"job_id,pk" json:"-"`
	Seq      int64  `bun:"seq,pk" json:"row"`
	EntityID string `bun:"entity_id" json:"id"`
	Status   string `bun:"status" json:"status"`
	Message  string `bun:"message" json:"message"`
}

// Per-entity result states.
const (
	ResultSuccess = "SUCCESS"
	ResultError   = "ERROR"
)

// JobProgress is a job's absolute progress. Writers always send the whole
// figure, never an increment, so a retried write changes nothing.
type JobProgress struct {
	Processed int64 `json:"processed"`
	Total     int64 `json:"total"`
	Success   int64 `json:"success_count"`
	Failed    int64 `json:"error_count"`
}

// Progress returns the job's progress as stored.
func (j *Job) Progress() JobProgress {
	return JobProgress{Processed: j.Processed, Total: j.Total, Success: j.SuccessCount, Failed: j.ErrorCount}
}

// JobStore reads and writes jobs and their results.
type JobStore struct {
	db    *bun.DB
	d     jobsDialect
	blobs *DBBlobStore // where uploaded files wait for their jobs
	onEnd JobEndFunc   // see OnEnd
}

// JobEndFunc is what another area does in the transaction that ends or
// deletes job jobID, saying why (management fails the upload the job was
// resolving).
type JobEndFunc func(ctx context.Context, tx bun.IDB, jobID int64, why string) error

// OnEnd makes the store call fn in the transaction that ends or deletes a
// job. NewStore wires it; it returns s.
func (s *JobStore) OnEnd(fn JobEndFunc) *JobStore {
	s.onEnd = fn
	return s
}

// NewJobStore returns the JobStore over db, keeping uploaded files in blobs.
func NewJobStore(db *bun.DB, blobs *DBBlobStore) *JobStore {
	return &JobStore{db: db, d: jobsDialectOf(db), blobs: blobs}
}

// ErrJobNotFound is the answer for a job that does not exist in the
// caller's organization, or was deleted.
var ErrJobNotFound = models.NotFound("Job", "the job does not exist or was deleted")

// Create writes job as QUEUED, filling its id and times. EINVALID when
// kind, module or action name is missing. (A job written with its input, as
// an upload's, is Store.CreateUploadJob.)
func (s *JobStore) Create(ctx context.Context, job *Job) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		return InsertJob(ctx, tx, job)
	})
}

// InsertJob is JobStore.Create inside db, which may be the caller's
// transaction (of sqldb.InTx) holding the job's input too: every job is
// written here, and records job.queued here, once.
func InsertJob(ctx context.Context, db bun.IDB, job *Job) error {
	switch {
	case job.OrgID == 0:
		return models.Invalid("org_id", "is required")
	case job.Kind == "":
		return models.Invalid("kind", "is required")
	case job.Module == "":
		return models.Invalid("module", "is required")
	case job.ActionName == "":
		return models.Invalid("action_name", "is required")
	}
	now := time.Now().UTC()
	if job.ID == 0 {
		job.ID = sqldb.NewID()
	}
	job.Status = JobQueued
	job.CreatedAt, job.StartTime, job.UpdatedAt = now, now, now
	job.EndTime = nil
	return sqldb.InTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(job).Exec(ctx); err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		if err := recordJob(ctx, job.OrgID, audit.JobQueued, job.ID, job.ActionName, "", ""); err != nil {
			return err
		}
		// A request sent with an Idempotency-Key claims its key for this
		// job in the same transaction (idempotency.go).
		return claimJob(ctx, tx, job)
	})
}

// JobTargetType is the target type of the job events.
const JobTargetType = "job"

// recordJob records event typ of job id (named by its action) with result
// (SUCCESS when empty) and reason. A job writes its own lifecycle
// (job.queued, job.started, job.completed or job.failed, job.deleted);
// what it did to each entity stays in its results, never in events.
func recordJob(ctx context.Context, orgID int64, typ string, id int64, action, result, reason string) error {
	return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: typ, Result: result, Reason: reason,
		Targets: []models.EventTarget{audit.Target(JobTargetType, id, action)}})
}

// Get returns one job of the organization. ENOTFOUND when missing.
func (s *JobStore) Get(ctx context.Context, orgID, id int64) (*Job, error) {
	job := new(Job)
	err := s.db.NewSelect().Model(job).Where("org_id = ? AND id = ?", orgID, id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrJobNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select job: %w", err)
	}
	return job, nil
}

// Delete removes a job, its results and its uploaded file, and fails the
// upload it was resolving (OnEnd), recording job.deleted. ENOTFOUND when
// missing.
func (s *JobStore) Delete(ctx context.Context, orgID, id int64) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		var action []string
		err := tx.NewDelete().Model((*Job)(nil)).Where("org_id = ? AND id = ?", orgID, id).
			Returning("action_name").Scan(ctx, &action)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delete job: %w", err)
		}
		if len(action) == 0 {
			return ErrJobNotFound
		}
		if err := recordJob(ctx, orgID, audit.JobDeleted, id, action[0], "", ""); err != nil {
			return err
		}
		if s.onEnd != nil {
			if err := s.onEnd(ctx, tx, id, "the job resolving the upload was deleted"); err != nil {
				return err
			}
		}
		return deleteJobBlobs(ctx, tx, id)
	})
}

// Start marks a QUEUED job RUNNING, recording job.started, and returns it;
// a job already RUNNING is returned as it is, so a retried start changes
// nothing (and records nothing). ENOTFOUND when the
// job was deleted; ECONFLICT when it has already finished.
func (s *JobStore) Start(ctx context.Context, orgID, id int64) (*Job, error) {
	var job *Job
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewUpdate().Model((*Job)(nil)).
			Set("status = ?", JobRunning).
			Set("updated_at = ?", time.Now().UTC()).
			Where("org_id = ? AND id = ? AND status = ?", orgID, id, JobQueued).
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("start job: %w", err)
		}
		job = new(Job)
		err = tx.NewSelect().Model(job).Where("org_id = ? AND id = ?", orgID, id).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrJobNotFound
		}
		if err != nil {
			return fmt.Errorf("select job: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		return recordJob(ctx, orgID, audit.JobStarted, id, job.ActionName, "", "")
	})
	if err != nil {
		return nil, err
	}
	if job.Status.Finished() {
		return job, models.Errorf(models.ECONFLICT, "the job has already finished")
	}
	return job, nil
}

// RecordChunk stores the results of one chunk of a RUNNING job and its new
// absolute progress, in one transaction. Results are upserted by (job, seq),
// so recording the same chunk twice leaves the same rows. ENOTFOUND when the
// job was deleted; ECONFLICT when it is no longer running.
//
// On PostgreSQL the results go in by COPY
// after the rows of their seqs are deleted, which leaves the same rows; on
// SQLite through one prepared upsert run once per result.
func (s *JobStore) RecordChunk(ctx context.Context, orgID, id int64, results []JobResult, p JobProgress) error {
	return s.d.recordChunk(ctx, s.db, orgID, id, results, p)
}

// Finish ends a job in status with a message and its final progress,
// recording job.completed (COMPLETED, or WARNING: the status and message
// its reason) or job.failed (ERROR: result FAILURE, the message its
// reason). Finishing a finished job again changes (and records) nothing. The job's uploaded file is deleted
// with the same transaction, and an upload it was resolving and did not
// finish resolving is failed (OnEnd). ENOTFOUND when the job was
// deleted.
func (s *JobStore) Finish(ctx context.Context, orgID, id int64, status JobStatus, message string, p JobProgress) error {
	if !status.Finished() {
		return models.Invalid("status", "%s is not a final job state", status)
	}
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		return FinishJob(ctx, tx, orgID, id, status, message, p, s.onEnd)
	})
}

// FinishJob is JobStore.Finish inside tx, calling onEnd (when not nil) with
// why the job ended.
func FinishJob(ctx context.Context, tx bun.Tx, orgID, id int64, status JobStatus, message string, p JobProgress, onEnd JobEndFunc) error {
	now := time.Now().UTC()
	var action []string
	err := tx.NewUpdate().Model((*Job)(nil)).
		Set("status = ?", status).
		Set("message = ?", message).
		Set("processed = ?", p.Processed).
		Set("total = ?", p.Total).
		Set("success_count = ?", p.Success).
		Set("error_count = ?", p.Failed).
		Set("end_time = ?", now).
		Set("updated_at = ?", now).
		Where("org_id = ? AND id = ? AND status IN (?)", orgID, id, bun.List([]JobStatus{JobQueued, JobRunning})).
		Returning("action_name").
		Scan(ctx, &action)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("finish job: %w", err)
	}
	if len(action) == 0 {
		if err := whyNotRunning(ctx, tx, orgID, id); models.ErrorCode(err) == models.ENOTFOUND {
			return err
		}
	} else if err := recordFinish(ctx, orgID, id, action[0], status, message); err != nil {
		return err
	}
	why := "the job resolving the upload ended " + string(status)
	if message != "" {
		why += ": " + message
	}
	if onEnd != nil {
		if err := onEnd(ctx, tx, id, why); err != nil {
			return err
		}
	}
	// The uploaded file is no longer needed: the results hold what the
	// job's rows said.
	return deleteJobBlobs(ctx, tx, id)
}

// recordFinish records the end of job id in status: job.completed for
// COMPLETED and WARNING (the status and message its reason), job.failed
// for ERROR (result FAILURE, the message its reason).
func recordFinish(ctx context.Context, orgID, id int64, action string, status JobStatus, message string) error {
	switch status {
	case JobError:
		return recordJob(ctx, orgID, audit.JobFailed, id, action, models.ResultFailure, message)
	case JobWarning:
		reason := string(status)
		if message != "" {
			reason += ": " + message
		}
		return recordJob(ctx, orgID, audit.JobCompleted, id, action, "", reason)
	default:
		return recordJob(ctx, orgID, audit.JobCompleted, id, action, "", "")
	}
}

// whyNotRunning explains why an update of a running job touched no row.
func whyNotRunning(ctx context.Context, db bun.IDB, orgID, id int64) error {
	var status JobStatus
	err := db.NewSelect().Model((*Job)(nil)).Column("status").
		Where("org_id = ? AND id = ?", orgID, id).Scan(ctx, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrJobNotFound
	}
	if err != nil {
		return fmt.Errorf("read job status: %w", err)
	}
	return models.Errorf(models.ECONFLICT, "the job is %s, not RUNNING", status)
}

// Results returns up to limit results of a job from offset, in row order,
// optionally only those with status. The caller has checked the job's
// organization.
func (s *JobStore) Results(ctx context.Context, jobID int64, status string, offset, limit int) ([]JobResult, error) {
	var results []JobResult
	q := s.db.NewSelect().Model(&results).Where("job_id = ?", jobID)
	if status != "" {
		q = q.Where("status = ?", status)
	}
	if err := q.Order("seq").Offset(int64(offset)).Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("select job results: %w", err)
	}
	return results, nil
}

// Stale returns, in id order, up to limit QUEUED jobs of any organization
// created before the given time and with an id above afterID: jobs whose
// workflow start may have been lost.
func (s *JobStore) Stale(ctx context.Context, before time.Time, afterID int64, limit int) ([]Job, error) {
	var jobs []Job
	err := s.db.NewSelect().Model(&jobs).
		Where("status = ? AND created_at < ? AND id > ?", JobQueued, before.UTC(), afterID).
		Order("id").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select queued jobs: %w", err)
	}
	return jobs, nil
}

// JobCount is how many jobs of one module are in one status.
type JobCount struct {
	Module string    `bun:"module"`
	Status JobStatus `bun:"status"`
	Count  int64     `bun:"count"`
}

// CountByModuleStatus counts the jobs of every organization by module and
// status: an operator's metric, never shown to an organization.
func (s *JobStore) CountByModuleStatus(ctx context.Context) ([]JobCount, error) {
	var out []JobCount
	err := s.db.NewSelect().Model((*Job)(nil)).
		ColumnExpr("module, status, count(*) AS count").
		Group("module", "status").Order("module", "status").Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return out, nil
}
