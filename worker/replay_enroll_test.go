package worker_test

import (
	"testing"
)

// Committed histories of the quick-enrollment workflows (record anew with
// go test -tags record ./worker -run ReplayEnroll -update).
var enrollHistories = []string{"enroll-csv-warning.json", "enroll-smartcards-error.json"}

func TestReplayEnroll_CommittedHistories(t *testing.T) {
	if *update {
		recordEnroll(t)
	}
	replayFiles(t, enrollHistories...)
}
