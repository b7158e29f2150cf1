package worker_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"iam/worker"
)

// Audit histories recorded from real runs (go test -tags record ./worker
// -run ReplayAudit -update): a seal of two organizations' events and a
// retention run.
var auditHistories = []string{"audit-seal.json", "audit-retention.json"}

func TestReplayAudit_CommittedHistories(t *testing.T) {
	if *update {
		recordAudit(t)
	}
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, file := range auditHistories {
		t.Run(file, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", file)); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}
