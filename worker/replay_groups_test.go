package worker_test

import (
	"path/filepath"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"log/slog"

	"iam/worker"
)

// Group recompute histories recorded from real runs (go test -tags record ./worker -run
// ReplayGroup -update): one that completes, one whose group is deleted
// before it runs.
var groupHistories = []struct {
	file         string
	deleteBefore bool
}{
	{"group-recompute-completed.json", false},
	{"group-recompute-group-deleted.json", true},
}

func TestReplayGroupRecompute_CommittedHistories(t *testing.T) {
	if *update {
		recordGroupRecomputes(t)
	}
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, h := range groupHistories {
		t.Run(h.file, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", h.file)); err != nil {
				t.Fatalf("replay %s: %v", h.file, err)
			}
		})
	}
}
