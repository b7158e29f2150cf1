package worker_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"iam/worker"
)

// A large upload's resolving job recorded from a real run (go test -tags record ./worker
// -run ReplayManagementResolve -update): 4,100 rows in three chunks, some
// rows naming no user, some a user an earlier chunk maps.
const mgmtResolveHistory = "management-upload-resolve.json"

func TestReplayManagementResolve_CommittedHistory(t *testing.T) {
	if *update {
		recordManagementResolve(t)
	}
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", mgmtResolveHistory)); err != nil {
		t.Fatalf("replay %s: %v", mgmtResolveHistory, err)
	}
}
