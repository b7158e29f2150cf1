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
	"iam/workflows"
)

func recordGroupRecomputes(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	ctx := context.Background()
	for i := range 12 {
		u := &identity.User{OrgID: env.Org.ID, Email: fmt.Sprintf("u%d@example.com", i), Department: []string{"Sales", "IT"}[i%2], Status: 1}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range groupHistories {
		job := &jobs.Job{Kind: workflows.GroupRecomputeWorkflowName, Module: workflows.IdentityModule, ActionName: workflows.GroupRecomputeAction}
		g := &identity.Group{OrgID: env.Org.ID, Name: fmt.Sprint("Sales ", i), IsDynamic: true, MembershipRule: `department eq "Sales"`}
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
		env.WaitJob(env.Org, job.ID, time.Minute, func(j *jobs.Job) bool { return j.Status.Finished() })
		_ = env.Temporal.GetWorkflow(ctx, job.WorkflowID(), "").Get(ctx, nil)
		writeHistory(t, env.Temporal, job.WorkflowID(), filepath.Join("testdata", h.file))
	}
}
