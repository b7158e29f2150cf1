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
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/management"
)

func recordManagement(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	ctx := context.Background()
	var ids []int64
	for i := range 8 {
		u := &identity.User{OrgID: env.Org.ID, Email: fmt.Sprintf("u%d@example.com", i), Status: 1}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	caller := ids[0]
	exec, job, err := env.Store.Management.CreateExecution(ctx, management.NewExecution{OrgID: env.Org.ID,
		Action: management.ActionDeleteUsers, CreatedBy: caller, Selection: management.Selection{UserIDs: append(ids, 999)}})
	if err != nil {
		t.Fatal(err)
	}
	recorded := []*jobs.Job{job}
	if err := env.Jobs.Launch(ctx, job); err != nil {
		t.Fatal(err)
	}
	env.WaitJob(env.Org, job.ID, time.Minute, func(j *jobs.Job) bool { return j.Status.Finished() })
	_ = env.Temporal.GetWorkflow(ctx, job.WorkflowID(), "").Get(ctx, nil)
	_, retry, err := env.Store.Management.Retry(ctx, env.Org.ID, management.ActionDeleteUsers, exec.ID, caller)
	if err != nil {
		t.Fatal(err)
	}
	recorded = append(recorded, retry)
	if err := env.Jobs.Launch(ctx, retry); err != nil {
		t.Fatal(err)
	}
	env.WaitJob(env.Org, retry.ID, time.Minute, func(j *jobs.Job) bool { return j.Status.Finished() })
	_ = env.Temporal.GetWorkflow(ctx, retry.WorkflowID(), "").Get(ctx, nil)
	for i, j := range recorded {
		writeHistory(t, env.Temporal, j.WorkflowID(), filepath.Join("testdata", mgmtHistories[i]))
	}
}
