//go:build record

package worker_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/identity"
	"iam/models/jobs"
)

func recordDeviceSyncs(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	ctx := context.Background()
	for i := range 10 {
		u := &identity.User{OrgID: env.Org.ID, Email: fmt.Sprintf("u%d@example.com", i), Status: identity.UserActive}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
	}
	devs := make([]devices.SeedDevice, 1400)
	for i := range devs {
		devs[i] = devices.SeedDevice{Name: fmt.Sprint("pc", i), Accounts: []string{fmt.Sprint("u", i%20), "Administrator", "x", "y", "z"}}
	}
	if _, err := env.Store.Devices.SeedDevices(ctx, env.Org.ID, devs); err != nil {
		t.Fatal(err)
	}
	set := devices.DefaultAccountLinkingSettings()
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
		j := env.WaitJob(env.Org, job.ID, 2*time.Minute, func(j *jobs.Job) bool { return j.Status.Finished() })
		if j.Status != jobs.JobCompleted || j.Processed != 7000 || j.SuccessCount != 700 {
			t.Fatalf("recorded job %+v", j)
		}
		_ = env.Temporal.GetWorkflow(ctx, job.WorkflowID(), "").Get(ctx, nil)
		writeHistory(t, env.Temporal, job.WorkflowID(), filepath.Join("testdata", file))
	}
}
