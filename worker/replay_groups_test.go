package worker_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"log/slog"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/worker"
	"iam/workflows"
)

// Group recompute histories recorded from real runs (go test ./worker -run
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
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, h := range groupHistories {
		t.Run(h.file, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", h.file)); err != nil {
				t.Fatalf("replay %s: %v", h.file, err)
			}
		})
	}
}

func recordGroupRecomputes(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	ctx := context.Background()
	for i := range 12 {
		u := &models.User{OrgID: env.Org.ID, Email: fmt.Sprintf("u%d@example.com", i), Department: []string{"Sales", "IT"}[i%2], Status: 1}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range groupHistories {
		job := &models.Job{Kind: workflows.GroupRecomputeWorkflowName, Module: workflows.IdentityModule, ActionName: workflows.GroupRecomputeAction}
		g := &models.Group{OrgID: env.Org.ID, Name: fmt.Sprint("Sales ", i), IsDynamic: true, MembershipRule: `department eq "Sales"`}
		if err := env.Store.Groups.Create(ctx, g, nil, job); err != nil {
			t.Fatal(err)
		}
		if h.deleteBefore {
			if err := env.Store.Groups.Delete(ctx, env.Org.ID, g.ID); err != nil {
				t.Fatal(err)
			}
		}
		if err := env.Jobs.Launch(ctx, job); err != nil {
			t.Fatal(err)
		}
		env.WaitJob(env.Org, job.ID, time.Minute, func(j *models.Job) bool { return j.Status.Finished() })
		_ = env.Temporal.GetWorkflow(ctx, job.WorkflowID(), "").Get(ctx, nil)
		writeHistory(t, env.Temporal, job.WorkflowID(), filepath.Join("testdata", h.file))
	}
}
