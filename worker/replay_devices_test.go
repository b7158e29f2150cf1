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

// Account-linking sync histories recorded from a real run (go test ./worker
// -run ReplayDeviceSync -update): 7,000 accounts, so the job takes two
// chunks of batches, some linked and some skipped.
var deviceSyncHistories = []string{"device-sync-completed.json"}

func TestReplayDeviceSync_CommittedHistories(t *testing.T) {
	if *update {
		recordDeviceSyncs(t)
	}
	replayer := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(replayer)
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, file := range deviceSyncHistories {
		t.Run(file, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", file)); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}
}

func recordDeviceSyncs(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	ctx := context.Background()
	for i := range 10 {
		u := &models.User{OrgID: env.Org.ID, Email: fmt.Sprintf("u%d@example.com", i), Status: models.UserActive}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
	}
	devs := make([]models.SeedDevice, 1400)
	for i := range devs {
		devs[i] = models.SeedDevice{Name: fmt.Sprint("pc", i), Accounts: []string{fmt.Sprint("u", i%20), "Administrator", "x", "y", "z"}}
	}
	if _, err := env.Store.Devices.SeedDevices(ctx, env.Org.ID, devs); err != nil {
		t.Fatal(err)
	}
	set := models.DefaultAccountLinkingSettings()
	set.IsEnabled = true
	if err := env.Store.Devices.PutLinkingSettings(ctx, env.Org.ID, &set); err != nil {
		t.Fatal(err)
	}
	for _, file := range deviceSyncHistories {
		job, _, err := env.Store.Devices.StartSync(ctx, env.Org.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Jobs.Launch(ctx, job); err != nil {
			t.Fatal(err)
		}
		j := env.WaitJob(env.Org, job.ID, 2*time.Minute, func(j *models.Job) bool { return j.Status.Finished() })
		if j.Status != models.JobCompleted || j.Processed != 7000 || j.SuccessCount != 700 {
			t.Fatalf("recorded job %+v", j)
		}
		_ = env.Temporal.GetWorkflow(ctx, job.WorkflowID(), "").Get(ctx, nil)
		writeHistory(t, env.Temporal, job.WorkflowID(), filepath.Join("testdata", file))
	}
}
