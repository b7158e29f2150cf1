package worker_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"iam/worker"
)

// Account-linking sync histories recorded from a real run (go test -tags record ./worker
// -run ReplayDeviceSync -update): 7,000 accounts, so the job takes two
// chunks of batches, some linked and some skipped.
var deviceSyncHistories = []string{"device-sync-completed.json"}

func TestReplayDeviceSync_CommittedHistories(t *testing.T) {
	if *update {
		recordDeviceSyncs(t)
	}
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, file := range deviceSyncHistories {
		t.Run(file, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", file)); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}
