package worker_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"iam/worker"
)

// Event hook histories recorded from real runs (go test -tags record ./worker
// -run ReplayHooks -update): a hook's delivery workflow that delivered an
// event and ended when the hook was disabled, and a supervisor run that
// started an enabled hook's workflow.
var hookHistories = []string{"event-hook-delivery.json", "event-hooks-supervise.json"}

func TestReplayHooks_CommittedHistories(t *testing.T) {
	if *update {
		recordHooks(t)
	}
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, file := range hookHistories {
		t.Run(file, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", file)); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}
