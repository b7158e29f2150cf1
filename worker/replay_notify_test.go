package worker_test

import (
	"testing"
)

// Notification run histories recorded from real runs (go test -tags record ./worker -run
// ReplayNotify -update records those missing from testdata): one that sends
// every delivery, one whose schedule was deleted before it ran (both from
// before run summaries, without the version marker), and one whose template
// names addresses of its own, which get the run's summary.
var notifyHistories = []struct {
	file           string
	deleteSchedule bool
	summaryTo      []string
}{
	{"notification-run-completed.json", false, nil},
	{"notification-run-schedule-gone.json", true, nil},
	{"notification-run-summary.json", false, []string{"SELF", "ops@example.com"}},
}

func TestReplayNotify_CommittedHistories(t *testing.T) {
	if *update {
		recordNotificationRuns(t)
	}
	var files []string
	for _, h := range notifyHistories {
		files = append(files, h.file)
	}
	replayFiles(t, files...)
}
