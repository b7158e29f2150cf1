package worker_test

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"iam/activities"
	"iam/api/apitest"
	"iam/models"
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
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, h := range histories {
		t.Run(h.file, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", h.file)); err != nil {
				t.Fatalf("replay %s: %v", h.file, err)
			}
		})
	}
}

// record runs each job on a real Temporal server and writes its history.
func record(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	for _, h := range histories {
		job := env.StartDiagnostic(env.Org, h.params)
		env.WaitJob(env.Org, job.ID, time.Minute, func(j *models.Job) bool { return j.Status.Finished() })
		run := env.Temporal.GetWorkflow(context.Background(), job.WorkflowID(), "")
		if err := run.Get(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		writeHistory(t, env.Temporal, job.WorkflowID(), filepath.Join("testdata", h.file))
	}
}

func writeHistory(t *testing.T, c client.Client, workflowID, path string) {
	iter := c.GetWorkflowHistory(context.Background(), workflowID, "", false, 0)
	var hist history.History
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		hist.Events = append(hist.Events, ev)
	}
	raw, err := protojson.Marshal(&hist)
	if err != nil {
		t.Fatal(err)
	}
	var pretty json.RawMessage = raw
	out, _ := json.MarshalIndent(pretty, "", "  ")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s (%d events)", path, len(hist.Events))
}
