package workflows

import (
	"encoding/json"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"iam/activities"
	"iam/models/jobs"
)

// Diagnostic job identity: the workflow type, and the module and action name
// its job row shows.
const (
	DiagnosticWorkflowName = jobs.DiagnosticJobKind
	DiagnosticModule       = "System"
	DiagnosticAction       = "Diagnostic"
)

var diagnosticActivities *activities.Diagnostics

// Diagnostic runs a diagnostic job: synthetic items processed in chunks, to
// prove the job machinery (progress, results, retries, continue-as-new)
// without touching business data.
func Diagnostic(ctx workflow.Context, in JobInput) error {
	run, err := startJob(ctx, in)
	if err != nil {
		return err
	}
	return run.finish(ctx, runDiagnostic(ctx, run))
}

func runDiagnostic(ctx workflow.Context, run *jobRun) error {
	var params activities.DiagnosticParams
	if err := json.Unmarshal(run.info.Input, &params); err != nil {
		return temporal.NewNonRetryableApplicationError("the job input is not valid", activities.ErrInvalid, err)
	}
	if params.ChunkSize <= 0 {
		params.ChunkSize = 100
	}
	ctx = workflow.WithActivityOptions(ctx, chunkOptions)
	for run.next < params.Items {
		if run.shouldContinueAsNew(ctx) {
			return run.continueAsNew(ctx, Diagnostic)
		}
		chunk := activities.DiagnosticChunk{
			Job:    run.ref,
			Params: params,
			From:   run.next,
			To:     min(run.next+params.ChunkSize, params.Items),
			Before: run.progress,
		}
		var p activities.Progress
		if err := workflow.ExecuteActivity(ctx, diagnosticActivities.RunDiagnosticChunk, chunk).Get(ctx, &p); err != nil {
			return err
		}
		run.advance(ctx, chunk.To, p)
	}
	return nil
}
