//go:build record

package worker_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/management"
)

func recordManagementResolve(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	ctx := context.Background()
	for i := range 3000 {
		u := &identity.User{OrgID: env.Org.ID, Email: fmt.Sprintf("u%d@example.com", i), Status: 1}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
	}
	const head = "Primary Email\n"
	var b strings.Builder
	b.WriteString(head)
	for i := range 4100 {
		fmt.Fprintf(&b, "u%d@example.com\n", i%3500) // 3000..3499 name nobody; 3500.. repeat 0..599
	}
	header, match, err := management.UploadHeader([]string{"Primary Email"})
	if err != nil {
		t.Fatal(err)
	}
	up := &management.MgmtUpload{OrgID: env.Org.ID, Action: management.ActionDeleteUsers, FileName: "big.csv", Header: header,
		MatchColumns: match, FileRows: 4100}
	job, err := env.Store.Management.CreateResolvingUpload(ctx, up, jobs.FileUpload{Name: "big.csv", ContentType: "text/csv",
		Body: strings.NewReader(b.String()), MaxSize: 1 << 20}, "UTF-8", int64(len(head)))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Jobs.Launch(ctx, job); err != nil {
		t.Fatal(err)
	}
	j := env.WaitJob(env.Org, job.ID, time.Minute, func(j *jobs.Job) bool { return j.Status.Finished() })
	if j.Status != jobs.JobWarning || j.SuccessCount != 3000 || j.ErrorCount != 1100 {
		t.Fatalf("job %s success %d errors %d", j.Status, j.SuccessCount, j.ErrorCount)
	}
	_ = env.Temporal.GetWorkflow(ctx, job.WorkflowID(), "").Get(ctx, nil)
	writeHistory(t, env.Temporal, job.WorkflowID(), filepath.Join("testdata", mgmtResolveHistory))
}
