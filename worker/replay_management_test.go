package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/worker"
)

// Management execution histories recorded from real runs (go test ./worker
// -run ReplayManagement -update): a delete whose caller and a missing user
// fail (completed_with_errors), and the retry of its failed users as
// attempt 2.
var mgmtHistories = []string{"management-delete-with-errors.json", "management-delete-retry.json"}

func TestReplayManagement_CommittedHistories(t *testing.T) {
	if *update {
		recordManagement(t)
	}
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, file := range mgmtHistories {
		t.Run(file, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", file)); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}

func recordManagement(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	ctx := context.Background()
	var ids []int64
	for i := range 8 {
		u := &models.User{OrgID: env.Org.ID, Email: fmt.Sprintf("u%d@example.com", i), Status: 1}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	caller := ids[0]
	exec, job, err := env.Store.Management.CreateExecution(ctx, models.NewExecution{OrgID: env.Org.ID,
		Action: models.ActionDeleteUsers, CreatedBy: caller, Selection: models.Selection{UserIDs: append(ids, 999)}})
	if err != nil {
		t.Fatal(err)
	}
	jobs := []*models.Job{job}
	if err = env.Jobs.Launch(ctx, job); err != nil {
		t.Fatal(err)
	}
	env.WaitJob(env.Org, job.ID, time.Minute, func(j *models.Job) bool { return j.Status.Finished() })
	_ = env.Temporal.GetWorkflow(ctx, job.WorkflowID(), "").Get(ctx, nil)
	_, retry, err := env.Store.Management.Retry(ctx, env.Org.ID, models.ActionDeleteUsers, exec.ID, caller)
	if err != nil {
		t.Fatal(err)
	}
	jobs = append(jobs, retry)
	if err := env.Jobs.Launch(ctx, retry); err != nil {
		t.Fatal(err)
	}
	env.WaitJob(env.Org, retry.ID, time.Minute, func(j *models.Job) bool { return j.Status.Finished() })
	_ = env.Temporal.GetWorkflow(ctx, retry.WorkflowID(), "").Get(ctx, nil)
	for i, j := range jobs {
		writeHistory(t, env.Temporal, j.WorkflowID(), filepath.Join("testdata", mgmtHistories[i]))
	}
}
