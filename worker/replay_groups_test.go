package worker_test

import (
	"testing"
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
	var files []string
	for _, h := range groupHistories {
		files = append(files, h.file)
	}
	replayFiles(t, files...)
}
