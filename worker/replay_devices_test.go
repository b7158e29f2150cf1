package worker_test

import (
	"testing"
)

// Account-linking sync histories recorded from a real run (go test -tags record ./worker
// -run ReplayDeviceSync -update): 7,000 accounts, so the job takes two
// chunks of batches, some linked and some skipped.
var deviceSyncHistories = []string{"device-sync-completed.json"}

func TestReplayDeviceSync_CommittedHistories(t *testing.T) {
	if *update {
		recordDeviceSyncs(t)
	}
	replayFiles(t, deviceSyncHistories...)
}
