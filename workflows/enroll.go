package workflows

import (
	"encoding/json"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/enrollment"
	"iam/models/jobs"
)

// Quick enrollment workflow types (the job rows' kind, models.*JobKind).
const (
	EnrollCSVWorkflowName        = jobs.EnrollCSVJobKind
	EnrollSmartCardsWorkflowName = jobs.EnrollSmartCardsJobKind
)

var enrollActivities *activities.Enrollment

// EnrollCSV runs a CSV enrollment job: it counts the file's rows once, then
// works through them in chunks, each chunk reading its rows from the byte
// offset the previous one recorded. Only row numbers and counts pass
// through the history; the file stays in the blob store.
func EnrollCSV(ctx workflow.Context, in JobInput) error {
	run, err := startJob(ctx, in)
	if err != nil {
		return err
	}
	return run.finish(ctx, runEnrollCSV(ctx, run))
}

func runEnrollCSV(ctx workflow.Context, run *jobRun) error {
	var params enrollment.EnrollCSVInput
	if err := json.Unmarshal(run.info.Input, &params); err != nil {
		return temporal.NewNonRetryableApplicationError("the job input is not valid", activities.ErrInvalid, err)
	}
	ctx = workflow.WithActivityOptions(ctx, chunkOptions)
	job := activities.EnrollCSVJob{Job: run.ref, Params: params}
	if run.next == 0 { // the first run: count the rows
		var p activities.Progress
		if err := workflow.ExecuteActivity(ctx, enrollActivities.CountEnrollCSVRows, job).Get(ctx, &p); err != nil {
			return err
		}
		run.advance(ctx, 1, p)
	}
	for {
		if run.shouldContinueAsNew(ctx) {
			return run.continueAsNew(ctx, EnrollCSV)
		}
		chunk := activities.EnrollCSVChunk{Job: run.ref, Params: params, From: run.next, Before: run.progress}
		var res activities.EnrollChunkResult
		if err := workflow.ExecuteActivity(ctx, enrollActivities.EnrollCSVRows, chunk).Get(ctx, &res); err != nil {
			return err
		}
		run.advance(ctx, res.Next, res.Progress)
		if res.Done {
			return nil
		}
	}
}

// EnrollSmartCards runs a smart-card enrollment job: the archive's entries
// in chunks of consecutive indexes.
func EnrollSmartCards(ctx workflow.Context, in JobInput) error {
	run, err := startJob(ctx, in)
	if err != nil {
		return err
	}
	return run.finish(ctx, runEnrollSmartCards(ctx, run))
}

func runEnrollSmartCards(ctx workflow.Context, run *jobRun) error {
	var params enrollment.EnrollSmartCardsInput
	if err := json.Unmarshal(run.info.Input, &params); err != nil {
		return temporal.NewNonRetryableApplicationError("the job input is not valid", activities.ErrInvalid, err)
	}
	size := int64(params.ChunkRows)
	if size <= 0 {
		size = 500
	}
	ctx = workflow.WithActivityOptions(ctx, chunkOptions)
	for {
		if run.shouldContinueAsNew(ctx) {
			return run.continueAsNew(ctx, EnrollSmartCards)
		}
		chunk := activities.EnrollSmartCardChunk{Job: run.ref, Params: params, From: run.next, To: run.next + size, Before: run.progress}
		var res activities.EnrollChunkResult
		if err := workflow.ExecuteActivity(ctx, enrollActivities.EnrollSmartCards, chunk).Get(ctx, &res); err != nil {
			return err
		}
		run.advance(ctx, res.Next, res.Progress)
		if res.Done {
			return nil
		}
	}
}
