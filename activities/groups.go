package activities

import (
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"iam/models"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/store"
)

// RecomputeChunk asks for up to Batches batches of BatchSize users of a
// dynamic group's recompute, starting after user id After.
type RecomputeChunk struct {
	Job       jobs.JobRef             `json:"job"`
	Input     identity.RecomputeInput `json:"input"`
	After     int64                   `json:"after,string"`
	BatchSize int                     `json:"batch_size"`
	Batches   int                     `json:"batches"`
	Before    Progress                `json:"before"` // progress before this chunk
}

// RecomputeChunkResult is where a chunk ended.
type RecomputeChunkResult struct {
	After    int64    `json:"after,string"` // last user id covered
	Done     bool     `json:"done"`
	Stopped  string   `json:"stopped,omitempty"` // why the recompute ended early
	Progress Progress `json:"progress"`
}

// Groups holds the activities of group jobs.
type Groups struct {
	Store *store.Store
}

// RecomputeGroupChunk recomputes a dynamic group's members batch after
// batch, each batch a transaction of its own. It heartbeats the last
// committed batch, so a retry resumes after it, and records the job's
// absolute progress (users covered) at the end; on the first chunk it
// counts the organization's users as the job's total.
func (a *Groups) RecomputeGroupChunk(ctx context.Context, in RecomputeChunk) (RecomputeChunkResult, error) {
	out := RecomputeChunkResult{After: in.After, Progress: in.Before}
	if activity.HasHeartbeatDetails(ctx) {
		var resumed RecomputeChunkResult
		if err := activity.GetHeartbeatDetails(ctx, &resumed); err == nil {
			out = resumed
		}
	}
	if out.Progress.Total == 0 {
		total, err := a.Store.Users.CountUsers(ctx, in.Job.OrgID)
		if err != nil {
			return out, err
		}
		out.Progress.Total = total
	}
	for range in.Batches {
		res, err := a.Store.Groups.RecomputeBatch(ctx, in.Job.OrgID, in.Input.GroupID, in.Input.RuleVersion, out.After, in.BatchSize)
		if err != nil {
			return out, temporalError(err)
		}
		if res.Stopped != "" {
			out.Stopped = res.Stopped
			return out, nil
		}
		out.After = res.Next
		out.Progress.Processed += res.Users
		out.Progress.Success = out.Progress.Processed
		out.Progress.Total = max(out.Progress.Total, out.Progress.Processed)
		activity.RecordHeartbeat(ctx, out)
		if res.Done {
			out.Done = true
			out.Progress.Total = out.Progress.Processed
			break
		}
	}
	var results []jobs.JobResult
	if out.Done {
		g, err := a.Store.Groups.Get(ctx, in.Job.OrgID, in.Input.GroupID)
		if err != nil {
			out.Stopped = identity.RecomputeGroupGone
			return out, nil
		}
		results = []jobs.JobResult{{Seq: 1, EntityID: models.FormatID(g.ID), Status: jobs.ResultSuccess,
			Message: fmt.Sprintf("%d members among %d users", g.MembersCount, out.Progress.Processed)}}
	}
	if err := a.Store.Jobs.RecordChunk(ctx, in.Job.OrgID, in.Job.JobID, results, out.Progress); err != nil {
		return out, temporalError(err)
	}
	return out, nil
}

// ReadRecomputeInput decodes a recompute job's input.
func ReadRecomputeInput(raw json.RawMessage) (identity.RecomputeInput, error) {
	var in identity.RecomputeInput
	if err := json.Unmarshal(raw, &in); err != nil || in.GroupID == 0 {
		return in, temporal.NewNonRetryableApplicationError("the job input is not a group recompute", ErrInvalid, err)
	}
	return in, nil
}
