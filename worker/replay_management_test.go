package worker_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"iam/worker"
)

// Management execution histories recorded from real runs (go test -tags record ./worker
// -run ReplayManagement -update): a delete whose caller and a missing user
// fail (completed_with_errors), and the retry of its failed users as
// attempt 2.
var mgmtHistories = []string{"management-delete-with-errors.json", "management-delete-retry.json"}

func TestReplayManagement_CommittedHistories(t *testing.T) {
	if *update {
		recordManagement(t)
	}
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, file := range mgmtHistories {
		t.Run(file, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", file)); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}
