package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"
	enumspb "go.temporal.io/api/enums/v1"

	"iam/activities"
	"iam/api"
	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/jobs"
)

type jobBody struct {
	ID         string  `json:"id"`
	Status     string  `json:"status"`
	Module     string  `json:"module"`
	ActionName string  `json:"action_name"`
	EndTime    *string `json:"end_time"`
	Progress   struct {
		Processed int64 `json:"processed"`
		Total     int64 `json:"total"`
	} `json:"progress"`
	Details struct {
		Result       []jobs.JobResult `json:"result"`
		SuccessCount int64            `json:"success_count"`
		ErrorCount   int64            `json:"error_count"`
		ResultCount  int64            `json:"result_count"`
	} `json:"details"`
}

type jobList struct {
	Data []map[string]any `json:"data"`
	Meta struct {
		StartIndex string `json:"start_index"`
		Limit      int    `json:"limit"`
		Total      int    `json:"total_no_of_objects"`
	} `json:"meta"`
}

func finished(j *jobs.Job) bool { return j.Status.Finished() }

func TestJobs_DiagnosticJobRunsToCompletion(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		tok := env.Token(env.Org, "svc.job.READ")
		job := env.StartDiagnostic(env.Org, activities.DiagnosticParams{Items: 250, ChunkSize: 40})
		env.WaitJob(env.Org, job.ID, 60*time.Second, finished)

		resp := env.Get(fmt.Sprintf("/api/v1/jobs/%d", job.ID), tok)
		if resp.Status != http.StatusOK {
			t.Fatalf("GET job: %d %s", resp.Status, resp.Body)
		}
		var got jobBody
		resp.JSON(t, &got)
		if got.Status != "COMPLETED" || got.EndTime == nil || got.Module != "System" {
			t.Errorf("job = %+v, want COMPLETED with an end time", got)
		}
		if got.Progress.Processed != 250 || got.Progress.Total != 250 {
			t.Errorf("progress = %+v, want 250/250", got.Progress)
		}
		if len(got.Details.Result) != 100 || got.Details.ResultCount != 250 || got.Details.SuccessCount != 250 {
			t.Errorf("details: %d results inline, counts %+v", len(got.Details.Result), got.Details)
		}
		if r := got.Details.Result[0]; r.Seq != 1 || r.Status != "SUCCESS" {
			t.Errorf("first result = %+v", r)
		}

		// The rest of the results page through /results.
		resp = env.Get(fmt.Sprintf("/api/v1/jobs/%d/results?from=200&limit=100", job.ID), tok)
		var page struct {
			Data []jobs.JobResult `json:"data"`
			Meta struct {
				StartIndex string `json:"start_index"`
				Total      int    `json:"total_no_of_objects"`
			} `json:"meta"`
		}
		resp.JSON(t, &page)
		if len(page.Data) != 50 || page.Data[0].Seq != 201 || page.Meta.Total != 250 || page.Meta.StartIndex != "200" {
			t.Errorf("results page: %d rows from %v, meta %+v", len(page.Data), page.Data, page.Meta)
		}

		// The workflow is visible in Temporal under job-<id>, closed. The job
		// row is final a moment before the workflow closes: wait for it.
		if err := env.Temporal.GetWorkflow(context.Background(), job.WorkflowID(), "").Get(context.Background(), nil); err != nil {
			t.Fatalf("workflow: %v", err)
		}
		desc, err := env.Temporal.DescribeWorkflowExecution(context.Background(), job.WorkflowID(), "")
		if err != nil {
			t.Fatal(err)
		}
		if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			t.Errorf("workflow status %v", st)
		}
	})
}

func TestJobs_SomeFailuresEndInWarningAndResultsFilter(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	tok := env.Token(env.Org, "svc.job.all") // ALL, in lower case, covers READ
	job := env.StartDiagnostic(env.Org, activities.DiagnosticParams{Items: 30, ChunkSize: 7, FailEvery: 10})
	done := env.WaitJob(env.Org, job.ID, 60*time.Second, finished)
	if done.Status != jobs.JobWarning || done.ErrorCount != 3 || done.SuccessCount != 27 {
		t.Fatalf("job ended %s with %d ok / %d failed, want WARNING 27/3", done.Status, done.SuccessCount, done.ErrorCount)
	}
	resp := env.Get(fmt.Sprintf("/api/v1/jobs/%d/results?filter=%s", job.ID, q(`status eq "ERROR"`)), tok)
	var page struct {
		Data []jobs.JobResult `json:"data"`
	}
	resp.JSON(t, &page)
	if len(page.Data) != 3 || page.Data[0].Seq != 10 || page.Data[2].Seq != 30 || page.Data[0].Message == "" {
		t.Errorf("error results = %+v", page.Data)
	}

	all := env.StartDiagnostic(env.Org, activities.DiagnosticParams{Items: 4, FailEvery: 1})
	if j := env.WaitJob(env.Org, all.ID, 60*time.Second, finished); j.Status != jobs.JobError {
		t.Errorf("a job whose every entity failed ended %s, want ERROR", j.Status)
	}
}

func TestJobs_ListFiltersAndPages(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		other := env.NewOrg("Other")
		for i := 0; i < 5; i++ {
			env.CreateDiagnostic(env.Org, activities.DiagnosticParams{Items: 1})
		}
		env.CreateDiagnostic(other, activities.DiagnosticParams{Items: 1})
		tok := env.Token(env.Org, "svc.job.READ")

		var list jobList
		env.Get("/api/v1/jobs", tok).JSON(t, &list)
		if len(list.Data) != 5 || list.Meta.Total != 5 || list.Meta.StartIndex != "0" || list.Meta.Limit != 200 {
			t.Fatalf("list = %d items, meta %+v; want the org's 5 jobs", len(list.Data), list.Meta)
		}
		if _, has := list.Data[0]["details"]; has {
			t.Error("the list must leave out details")
		}

		env.Get("/api/v1/jobs?from=3&limit=10&filter="+q(`module eq "System" and status eq "QUEUED"`), tok).JSON(t, &list)
		if len(list.Data) != 2 || list.Meta.Total != 5 || list.Meta.StartIndex != "3" {
			t.Errorf("page from 3 = %d items, meta %+v", len(list.Data), list.Meta)
		}
		env.Get("/api/v1/jobs?filter="+q(`status eq "COMPLETED"`), tok).JSON(t, &list)
		if len(list.Data) != 0 || list.Meta.Total != 0 {
			t.Errorf("no job is COMPLETED, got %d", len(list.Data))
		}
		env.Get("/api/v1/jobs?fields=status", tok).JSON(t, &list)
		if len(list.Data[0]) != 2 || list.Data[0]["status"] != "QUEUED" || list.Data[0]["id"] == nil {
			t.Errorf("fields=status gave %v, want id and status", list.Data[0])
		}
	})
}

func TestJobs_BadListParametersAre400NamingTheParameter(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	tok := env.Token(env.Org, "svc.job.READ")
	for query, param := range map[string]string{
		"filter=" + q(`status eq`):              "filter",
		"filter=" + q(`password eq "x"`):        "filter", // outside the allow-list
		"filter=" + q(`start_time gt "monday"`): "filter",
		"sort=nope":                             "sort",
		"fields=secret":                         "fields",
		"limit=0":                               "limit",
		"limit=abc":                             "limit",
		"from=-1":                               "from",
		"from=x":                                "from",
	} {
		resp := env.Get("/api/v1/jobs?"+query, tok)
		e := resp.ErrorBody(t)
		if resp.Status != http.StatusBadRequest || e.Code != api.CodeInvalidParameter || !strings.Contains(e.Detail, param) {
			t.Errorf("?%s: %d %+v, want 400 00000107 naming %q", query, resp.Status, e, param)
		}
	}
}

func TestJobs_GetAndDeleteAnswerNotFound(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	other := env.NewOrg("Other")
	theirs := env.CreateDiagnostic(other, activities.DiagnosticParams{Items: 1})
	tok := env.Token(env.Org, "svc.job.READ", "svc.job.DELETE")
	for _, path := range []string{"/api/v1/jobs/123", "/api/v1/jobs/abc", fmt.Sprintf("/api/v1/jobs/%d", theirs.ID)} {
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			resp := env.Do(apitest.Request{Method: method, Path: path, Token: tok})
			if e := resp.ErrorBody(t); resp.Status != http.StatusNotFound || e.Title != "Job Not Found" {
				t.Errorf("%s %s: %d %+v, want 404 Job Not Found", method, path, resp.Status, e)
			}
		}
	}
	if _, err := env.Store.Jobs.Get(context.Background(), other.ID, theirs.ID); err != nil {
		t.Errorf("the other organization's job must survive: %v", err)
	}
}

// TestJobs_DeleteWithoutWorkflowEngine: an API without a Temporal client
// deletes the job (204) instead of panicking after the row is gone.
func TestJobs_DeleteWithoutWorkflowEngine(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	tok := env.Token(env.Org, "svc.job.ALL")
	job := env.CreateDiagnostic(env.Org, activities.DiagnosticParams{Items: 1})
	resp := env.Do(apitest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/v1/jobs/%d", job.ID), Token: tok})
	if resp.Status != http.StatusNoContent {
		t.Fatalf("DELETE without a workflow engine: %d %s, want 204", resp.Status, resp.Body)
	}
	if resp := env.Get(fmt.Sprintf("/api/v1/jobs/%d", job.ID), tok); resp.Status != http.StatusNotFound {
		t.Errorf("GET after DELETE: %d, want 404", resp.Status)
	}
}

func TestJobs_DeleteCancelsTheRunningWorkflow(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	tok := env.Token(env.Org, "svc.job.ALL")
	job := env.StartDiagnostic(env.Org, activities.DiagnosticParams{Items: 1000, ChunkSize: 10, DelayMillis: 20})
	env.WaitJob(env.Org, job.ID, 30*time.Second, func(j *jobs.Job) bool { return j.Processed > 0 })

	resp := env.Do(apitest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/v1/jobs/%d", job.ID), Token: tok})
	if resp.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", resp.Status, resp.Body)
	}
	if resp := env.Get(fmt.Sprintf("/api/v1/jobs/%d", job.ID), tok); resp.Status != http.StatusNotFound {
		t.Errorf("GET after DELETE: %d", resp.Status)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		desc, err := env.Temporal.DescribeWorkflowExecution(context.Background(), job.WorkflowID(), "")
		if err != nil {
			t.Fatal(err)
		}
		st := desc.GetWorkflowExecutionInfo().GetStatus()
		if st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			if st != enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED && st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
				t.Errorf("workflow ended %v, want cancelled", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the workflow still runs 30s after its job was deleted")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// q escapes a filter for a query string.
func q(s string) string {
	r := strings.NewReplacer(" ", "%20", `"`, "%22", "&", "%26", "=", "%3D")
	return r.Replace(s)
}
