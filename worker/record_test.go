//go:build record

package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/jobs"
)

// record runs each job on a real Temporal server and writes its history.
func record(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	for _, h := range histories {
		job := env.StartDiagnostic(env.Org, h.params)
		env.WaitJob(env.Org, job.ID, time.Minute, func(j *jobs.Job) bool { return j.Status.Finished() })
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
