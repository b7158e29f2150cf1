package worker_test

import (
	"flag"
	"log/slog"
	"path/filepath"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"iam/activities"
	"iam/models/dbtest"
	"iam/worker"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var update = flag.Bool("update", false, "record the workflow histories in testdata anew")

// Histories recorded from real runs, replayed against today's workflow code:
// a change that breaks determinism for runs in flight fails here. Record them
// anew (go test ./worker -run Replay -update) only for a change that is
// deliberately incompatible, and version the workflow instead where runs may
// be in flight.
var histories = []struct {
	file   string
	params activities.DiagnosticParams
}{
	{"diagnostic-completed.json", activities.DiagnosticParams{Items: 25, ChunkSize: 10}},
	{"diagnostic-warning.json", activities.DiagnosticParams{Items: 12, ChunkSize: 5, FailEvery: 4}},
}

func TestReplay_CommittedHistories(t *testing.T) {
	if *update {
		record(t)
	}
	var files []string
	for _, h := range histories {
		files = append(files, h.file)
	}
	replayFiles(t, files...)
}

// replayFiles replays each of the committed histories in testdata against
// today's workflow code, a subtest per file: a change that breaks
// determinism for runs in flight fails here.
func replayFiles(t *testing.T, files ...string) {
	t.Helper()
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", file)); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}
