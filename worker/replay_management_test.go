package worker_test

import (
	"testing"
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
	replayFiles(t, mgmtHistories...)
}
