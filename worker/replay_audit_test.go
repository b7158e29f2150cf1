package worker_test

import (
	"testing"
)

// Audit histories recorded from real runs (go test -tags record ./worker
// -run ReplayAudit -update): a seal of two organizations' events and a
// retention run.
var auditHistories = []string{"audit-seal.json", "audit-retention.json"}

func TestReplayAudit_CommittedHistories(t *testing.T) {
	if *update {
		recordAudit(t)
	}
	replayFiles(t, auditHistories...)
}
