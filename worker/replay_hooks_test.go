package worker_test

import (
	"testing"
)

// Event hook histories recorded from real runs (go test -tags record ./worker
// -run ReplayHooks -update): a hook's delivery workflow that delivered an
// event and ended when the hook was disabled, and a supervisor run that
// started an enabled hook's workflow.
var hookHistories = []string{"event-hook-delivery.json", "event-hooks-supervise.json"}

func TestReplayHooks_CommittedHistories(t *testing.T) {
	if *update {
		recordHooks(t)
	}
	replayFiles(t, hookHistories...)
}
