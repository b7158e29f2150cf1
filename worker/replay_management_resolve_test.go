package worker_test

import (
	"testing"
)

// A large upload's resolving job recorded from a real run (go test -tags record ./worker
// -run ReplayManagementResolve -update): 4,100 rows in three chunks, some
// rows naming no user, some a user an earlier chunk maps.
const mgmtResolveHistory = "management-upload-resolve.json"

func TestReplayManagementResolve_CommittedHistory(t *testing.T) {
	if *update {
		recordManagementResolve(t)
	}
	replayFiles(t, mgmtResolveHistory)
}
