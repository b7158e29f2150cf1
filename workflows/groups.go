package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/jobs"
)

// Group recompute job identity: the workflow type, and the module and action
// name its job row shows.
const (
	GroupRecomputeWorkflowName = jobs.GroupRecomputeJobKind
	IdentityModule             = "Identity"
	GroupRecomputeAction       = "Recompute dynamic group members"
)

// Recompute sizing: users per batch (one transaction each) and batches per
// activity (one heartbeat per batch). 1,000,000 users take 10 activities.
const (
	RecomputeBatchSize       = 20000
	RecomputeBatchesPerChunk = 5
)

var groupActivities *activities.Groups

// GroupRecompute recomputes the members of a dynamic group after its rule
// was set or changed: the organization's users in id order, in keyset-
// bounded batches, each a set-based DELETE and INSERT … SELECT with the rule
// as its condition. The job ends in ERROR, saying why, when the group is
// deleted or its rule changes again meanwhile (a newer job takes over).
func GroupRecompute(ctx workflow.Context, in JobInput) error {
	run, err := startJob(ctx, in)
	if err != nil {
		return err
	}
	return run.finish(ctx, runGroupRecompute(ctx, run))
}

func runGroupRecompute(ctx workflow.Context, run *jobRun) error {
	input, err := activities.ReadRecomputeInput(run.info.Input)
	if err != nil {
		return err
	}
	ctx = workflow.WithActivityOptions(ctx, chunkOptions)
	for {
		if run.shouldContinueAsNew(ctx) {
			return run.continueAsNew(ctx, GroupRecompute)
		}
		chunk := activities.RecomputeChunk{
			Job:       run.ref,
			Input:     input,
			After:     run.next,
			BatchSize: RecomputeBatchSize,
			Batches:   RecomputeBatchesPerChunk,
			Before:    run.progress,
		}
		var res activities.RecomputeChunkResult
		if err := workflow.ExecuteActivity(ctx, groupActivities.RecomputeGroupChunk, chunk).Get(ctx, &res); err != nil {
			return err
		}
		if res.Stopped != "" {
			return temporal.NewNonRetryableApplicationError(res.Stopped, activities.ErrInvalid, nil)
		}
		run.advance(ctx, res.After, res.Progress)
		if res.Done {
			return nil
		}
	}
}
