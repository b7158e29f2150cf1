package worker_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"iam/worker"
)

// Committed histories of the quick-enrollment workflows (record anew with
// go test -tags record ./worker -run ReplayEnroll -update).
var enrollHistories = []string{"enroll-csv-warning.json", "enroll-smartcards-error.json"}

func TestReplayEnroll_CommittedHistories(t *testing.T) {
	if *update {
		recordEnroll(t)
	}
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, file := range enrollHistories {
		t.Run(file, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", file)); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}
