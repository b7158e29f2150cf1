package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
)

// Job metrics, recorded through the Temporal SDK's metrics handler (replay
// safe in workflow code) and served by the worker on /metrics
// (worker.NewMetricsHandler). docs/operations.md lists them.
const (
	// MetricRowsProcessed counts the entities (rows, users, accounts,
	// recipients) job workflows processed, by module.
	MetricRowsProcessed = "iam_job_rows_processed"
	// MetricChunkDuration times a job's chunks, by module: from one
	// recorded progress point of the workflow to the next.
	MetricChunkDuration = "iam_job_chunk_duration"
	// MetricDeliveries counts notification deliveries by outcome (sent,
	// failed, uncertain, temporary).
	MetricDeliveries = "iam_notification_deliveries"
)

// Metric tag names.
const (
	TagModule  = "module"
	TagOutcome = "outcome"
)

// metrics is the activity's metrics handler, or one that records nothing
// when ctx is not an activity's (a function called directly by a test).
func metrics(ctx context.Context) client.MetricsHandler {
	if !activity.IsActivity(ctx) {
		return client.MetricsNopHandler
	}
	return activity.GetMetricsHandler(ctx)
}
