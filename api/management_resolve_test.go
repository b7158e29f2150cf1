package api_test

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/jobs"
	"iam/models/management"
	"iam/models/secret/secrettest"
	"iam/models/sqldb"
	"iam/worker"
)

type resolvingUploadBody struct {
	Data struct {
		ID        int64  `json:"id"`
		Status    string `json:"status"`
		RowCount  int64  `json:"row_count"`
		TotalRows int64  `json:"total_rows"`
		JobID     string `json:"job_id"`
		Message   string `json:"message"`
	} `json:"data"`
}

// A 12,000-row upload is answered at once (202, resolving, with its job)
// and resolved by the job: until then GET shows it resolving and execute
// answers 409 saying so; then every row has the state the request's path
// gives (MAPPED, DUPLICATE_USER of rows of earlier chunks, NOT_FOUND,
// INVALID), the job ends WARNING with a result per row, and the upload
// executes its MAPPED rows.
//
// The API runs first without a worker, so that the upload is surely still
// resolving when execute is tried; the job is then started on a worker.
// A second large upload whose job is deleted is failed, and execute says
// so (409).
func TestManagement_LargeUploadResolvedByAJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		const users, rows = 10_000, 12_000
		env := apitest.New(t, db, apitest.Options{})
		ctx := t.Context()
		ids := seedUsers(t, db, env.Org, users)
		tok := env.Token(env.Org, "svc.management.all")

		var csv bytes.Buffer
		csv.WriteString("Primary Email,Note\n")
		for i := 1; i <= rows; i++ {
			switch {
			case i <= users:
				fmt.Fprintf(&csv, "user%d@example.com,n%d\n", i, i)
			case i <= users+1000: // users 1..1000 again, chunks later
				fmt.Fprintf(&csv, "USER%d@example.com,n%d\n", i-users, i)
			case i <= rows-10:
				fmt.Fprintf(&csv, "nobody%d@example.com,n%d\n", i, i)
			default:
				fmt.Fprintf(&csv, ",n%d\n", i)
			}
		}
		body, h := csvUpload(t, csv.Bytes(), "", false)
		resp := env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "delete-users/uploads", Token: tok, Body: body, Header: h})
		if resp.Status != 202 {
			t.Fatalf("upload: %d %s", resp.Status, resp.Body)
		}
		var up resolvingUploadBody
		resp.JSON(t, &up)
		path := mgmtBase + "delete-users/uploads/" + fmt.Sprint(up.Data.ID)
		if d := up.Data; d.Status != "resolving" || d.TotalRows != rows || d.RowCount != 0 || d.JobID == "" ||
			resp.Header.Get("Location") != path {
			t.Fatalf("upload answered %+v, Location %q", d, resp.Header.Get("Location"))
		}
		env.Get(path, tok).JSON(t, &up)
		if up.Data.Status != "resolving" {
			t.Fatalf("GET shows %s before the job ran", up.Data.Status)
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "delete-users/execute", Token: tok,
			Body: map[string]any{"upload_id": fmt.Sprint(up.Data.ID)}}), 409, "00000105", "still resolving")
		wantError(t, env.Do(apitest.Request{Method: "DELETE", Path: path + "/data?ids=1", Token: tok}), 409, "00000105", "still resolving")

		// Another large upload whose job is deleted before it ran: failed,
		// saying why; execute answers 409 saying so.
		resp = env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "delete-users/uploads", Token: tok, Body: body, Header: h})
		var gone resolvingUploadBody
		resp.JSON(t, &gone)
		if resp.Status != 202 {
			t.Fatalf("second upload: %d %s", resp.Status, resp.Body)
		}
		if del := env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/jobs/" + gone.Data.JobID, Token: env.Token(env.Org, "svc.job.DELETE")}); del.Status != 204 {
			t.Fatalf("delete the job: %d %s", del.Status, del.Body)
		}
		gonePath := mgmtBase + "delete-users/uploads/" + fmt.Sprint(gone.Data.ID)
		env.Get(gonePath, tok).JSON(t, &gone)
		if gone.Data.Status != "failed" || !strings.Contains(gone.Data.Message, "deleted") {
			t.Errorf("upload whose job was deleted: %+v", gone.Data)
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "delete-users/execute", Token: tok,
			Body: map[string]any{"upload_id": fmt.Sprint(gone.Data.ID)}}), 409, "00000105", "could not be resolved")

		hostPort, ns := apitest.TemporalAddress(t)
		tc, err := client.Dial(client.Options{HostPort: hostPort, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tc.Close)
		env.Jobs.Client, env.Jobs.TaskQueue = tc, fmt.Sprintf("mgmt-resolve-%d", sqldb.NewID())
		w := worker.NewOn(tc, env.Jobs.TaskQueue, worker.Deps{Store: env.Store, Secrets: secrettest.Box})
		if err = w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		jobID := mustID(t, up.Data.JobID)
		job, err := env.Store.Jobs.Get(ctx, env.Org.ID, jobID)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Jobs.Launch(ctx, job); err != nil {
			t.Fatal(err)
		}
		job = env.WaitJob(env.Org, jobID, 2*time.Minute, finished)
		if job.Status != jobs.JobWarning || job.Module != management.MgmtModule || job.Processed != rows ||
			job.SuccessCount != users || job.ErrorCount != rows-users {
			t.Errorf("job %s %s processed %d success %d errors %d", job.Module, job.Status, job.Processed, job.SuccessCount, job.ErrorCount)
		}
		env.Get(path, tok).JSON(t, &up)
		if d := up.Data; d.Status != "resolved" || d.RowCount != rows || d.TotalRows != rows {
			t.Fatalf("after the job: %+v", d)
		}
		for status, want := range map[string]int{"MAPPED": users, "DUPLICATE_USER": 1000, "NOT_FOUND": 990, "INVALID": 10} {
			var page mgmtRowsBody
			env.Get(path+"/data?limit=1&filter="+url.QueryEscape(`status eq "`+status+`"`), tok).JSON(t, &page)
			if page.Meta.Total != want {
				t.Errorf("%d %s rows, want %d", page.Meta.Total, status, want)
			}
		}
		var page mgmtRowsBody
		env.Get(path+"/data?filter="+url.QueryEscape("id eq 10500"), tok).JSON(t, &page)
		if len(page.Data) != 1 || page.Data[0].ID != "10500" || page.Data[0].Status != "DUPLICATE_USER" ||
			page.Data[0].Message != "row 500 already names this user" || page.Data[0].UserID != models.FormatID(ids[500]) {
			t.Errorf("row 10500 = %+v", page.Data)
		}
		env.Get(path+"/data?filter="+url.QueryEscape("id eq 2000"), tok).JSON(t, &page)
		if len(page.Data) != 1 || page.Data[0].ID != "2000" || page.Data[0].Status != "MAPPED" || page.Data[0].ImportedData["Note"] != "n2000" ||
			page.Data[0].UserID != models.FormatID(ids[2000]) {
			t.Errorf("row 2000 = %+v", page.Data)
		}
		env.Get(path+"/data?filter="+url.QueryEscape("id eq 12000"), tok).JSON(t, &page)
		if len(page.Data) != 1 || page.Data[0].Status != "INVALID" || !strings.Contains(page.Data[0].Message, "no value") {
			t.Errorf("row 12000 = %+v", page.Data)
		}
		// The resolving job's results as CSV carry each row's match column
		// as the file gave it.
		recs := readCSV(t, env.Do(apitest.Request{Method: "GET", Path: "/api/v1/jobs/" + up.Data.JobID + "/results",
			Token: env.Token(env.Org, "svc.job.READ"), Header: acceptCSV}))
		if len(recs) != rows+1 || strings.Join(recs[0], ",") != "row,id,status,message,Primary Email" ||
			strings.Join(recs[2000], ",") != "2000,2000,SUCCESS,MAPPED,user2000@example.com" ||
			strings.Join(recs[10500], ",") != "10500,10500,ERROR,DUPLICATE_USER: row 500 already names this user,USER500@example.com" {
			t.Errorf("resolving job's CSV: %d lines, %q %q %q", len(recs), recs[0], recs[min(2000, len(recs)-1)], recs[min(10500, len(recs)-1)])
		}

		execPath, acc := execute(t, env, tok, "delete-users", map[string]any{"upload_id": fmt.Sprint(up.Data.ID)})
		if acc.Data.Status != "yet_to_start" {
			t.Errorf("execute answered %+v", acc.Data)
		}
		if got := waitExecution(t, env, tok, execPath); got != "completed" {
			t.Fatalf("execution %s", got)
		}
		if left, _ := db.NewSelect().Table("users").Where("org_id = ?", env.Org.ID).Count(ctx); left != 0 {
			t.Errorf("%d users left", left)
		}
	})
}
