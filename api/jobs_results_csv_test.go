package api_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
)

var acceptCSV = http.Header{"Accept": {"text/csv"}}

// readCSV parses a CSV answer.
func readCSV(t *testing.T, resp *apitest.Response) [][]string {
	t.Helper()
	if resp.Status != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("CSV: %d %s %s", resp.Status, resp.Header.Get("Content-Type"), resp.Body)
	}
	recs, err := csv.NewReader(bytes.NewReader(resp.Body)).ReadAll()
	if err != nil {
		t.Fatalf("parse CSV: %v", err)
	}
	return recs
}

// userJob writes a finished job of org whose entity is a user, with
// results.
func userJob(t *testing.T, env *apitest.Env, org *identity.Organization, entity string, results []jobs.JobResult) *jobs.Job {
	t.Helper()
	ctx := t.Context()
	job := &jobs.Job{OrgID: org.ID, Kind: jobs.EnrollCSVJobKind, Module: "Quick enrollment", ActionName: "Upload CSV", Entity: entity}
	if err := env.Store.Jobs.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Jobs.Start(ctx, org.ID, job.ID); err != nil {
		t.Fatal(err)
	}
	n := int64(len(results))
	if err := env.Store.Jobs.RecordChunk(ctx, org.ID, job.ID, results, jobs.JobProgress{Processed: n, Total: n, Success: n}); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Jobs.Finish(ctx, org.ID, job.ID, jobs.JobCompleted, "", jobs.JobProgress{Processed: n, Total: n, Success: n}); err != nil {
		t.Fatal(err)
	}
	return job
}

// TestJobResultsCSV_EveryRowQuotedAndNeutralised: with Accept: text/csv
// every result (2,500: three pages of the export) comes as one attachment
// in row order, with the user's email for a user job; quotes, commas and
// line breaks survive a CSV reader; cells beginning with =, +, -, @, tab or
// CR get a quote before them. Without the Accept the route answers JSON as
// before; another organization's job is 404, a token without job scopes
// 403.
func TestJobResultsCSV_EveryRowQuotedAndNeutralised(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		users := seedUsers(t, db, env.Org, 3)
		const n = 2500
		hostile := map[int64][2]string{ // message as written, as exported
			1: {`=HYPERLINK("http://evil.example","x")`, `'=HYPERLINK("http://evil.example","x")`},
			2: {"+1", "'+1"},
			3: {"-2+3", "'-2+3"},
			4: {"@SUM(A1:A2)", "'@SUM(A1:A2)"},
			5: {"\tcmd", "'\tcmd"},
			6: {"\rcmd", "'\rcmd"},
			7: {"a \"quoted\", comma\nand a line break", "a \"quoted\", comma\nand a line break"},
			8: {"ok = fine", "ok = fine"},
		}
		results := make([]jobs.JobResult, n)
		for i := range results {
			seq := int64(i + 1)
			r := jobs.JobResult{Seq: seq, EntityID: models.FormatID(users[i%3+1]), Status: jobs.ResultSuccess, Message: "row " + strconv.FormatInt(seq, 10)}
			if h, ok := hostile[seq]; ok {
				r.Message = h[0]
			}
			if seq == 9 {
				r.EntityID, r.Status, r.Message = "", jobs.ResultError, "no user of the organization has Primary Email"
			}
			if seq == 10 {
				r.EntityID = "=1+1" // never an id, but an id cell is neutralised too
			}
			results[i] = r
		}
		job := userJob(t, env, env.Org, "user", results)
		tok := env.Token(env.Org, "svc.job.READ")
		path := fmt.Sprintf("/api/v1/jobs/%d/results", job.ID)

		resp := env.Do(apitest.Request{Method: http.MethodGet, Path: path + "?filter=status%20eq%20%22ERROR%22&limit=5", Token: tok, Header: acceptCSV})
		recs := readCSV(t, resp)
		if want := fmt.Sprintf(`attachment; filename="job-%d-results.csv"`, job.ID); resp.Header.Get("Content-Disposition") != want {
			t.Errorf("Content-Disposition %q, want %q", resp.Header.Get("Content-Disposition"), want)
		}
		if strings.Join(recs[0], ",") != "row,id,status,message,email" {
			t.Fatalf("header %v", recs[0])
		}
		if len(recs) != n+1 {
			t.Fatalf("%d rows, want every result (%d): filter and limit are ignored", len(recs)-1, n)
		}
		for i, rec := range recs[1:] {
			seq := int64(i + 1)
			r := results[i]
			wantMsg, wantID, wantEmail := r.Message, r.EntityID, fmt.Sprintf("user%d@example.com", i%3+1)
			if h, ok := hostile[seq]; ok {
				wantMsg = h[1]
			}
			switch seq {
			case 9:
				wantEmail = ""
			case 10:
				wantID, wantEmail = "'=1+1", ""
			}
			want := []string{strconv.FormatInt(seq, 10), wantID, r.Status, wantMsg, wantEmail}
			if strings.Join(rec, "|") != strings.Join(want, "|") {
				t.Errorf("row %d: %q, want %q", seq, rec, want)
			}
		}

		// JSON as before without the Accept.
		var page struct {
			Data []jobs.JobResult `json:"data"`
		}
		env.Get(path, tok).JSON(t, &page)
		if len(page.Data) != 200 || page.Data[0].Message != hostile[1][0] {
			t.Errorf("JSON page: %d results, first %+v", len(page.Data), page.Data[0])
		}

		other := env.NewOrg("Other")
		wantError(t, env.Do(apitest.Request{Method: http.MethodGet, Path: path, Token: env.Token(other, "svc.job.ALL"), Header: acceptCSV}), 404, "00000103", "does not exist")
		wantError(t, env.Do(apitest.Request{Method: http.MethodGet, Path: path, Token: env.Token(env.Org, "svc.user.ALL", "svc.job.DELETE"), Header: acceptCSV}), 403, "00000102", "")

		// A job whose entity is not a user has no email column; an empty
		// job is the header alone.
		plain := userJob(t, env, env.Org, "Upload row", results[:2])
		recs = readCSV(t, env.Do(apitest.Request{Method: http.MethodGet, Path: fmt.Sprintf("/api/v1/jobs/%d/results", plain.ID), Token: tok, Header: acceptCSV}))
		if len(recs) != 3 || strings.Join(recs[0], ",") != "row,id,status,message" || recs[1][3] != hostile[1][1] {
			t.Errorf("non-user job: %q", recs)
		}
		empty := userJob(t, env, env.Org, "user", nil)
		recs = readCSV(t, env.Do(apitest.Request{Method: http.MethodGet, Path: fmt.Sprintf("/api/v1/jobs/%d/results", empty.ID), Token: tok, Header: acceptCSV}))
		if len(recs) != 1 {
			t.Errorf("empty job: %q", recs)
		}
	})
}

// TestJobResultsCSV_ManagementExecution: an execution's data as CSV after
// a real move through the workflow: every user's result with email and
// names, names neutralised; another organization's execution 404.
func TestJobResultsCSV_ManagementExecution(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		ctx := t.Context()
		for i, first := range []string{"=cmd|' /C calc'!A0", "Plain"} {
			u := &identity.User{OrgID: env.Org.ID, Email: fmt.Sprintf("m%d@example.com", i), FirstName: first, LastName: "-minus", Status: 1}
			if err := env.Store.Users.Create(ctx, u, ""); err != nil {
				t.Fatal(err)
			}
		}
		tok := env.Token(env.Org, "svc.management.all")
		body, h := csvUpload(t, []byte("Primary Email\nm0@example.com\nm1@example.com\n"), "", false)
		var up mgmtUploadBody
		env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "move-users/uploads", Token: tok, Body: body, Header: h}).JSON(t, &up)
		path, acc := execute(t, env, tok, "move-user", map[string]any{"upload_id": fmt.Sprint(up.Data.ID), "target_container": "OU=R,DC=example"})
		if got := waitExecution(t, env, tok, path); got != "completed" {
			t.Fatalf("status %s", got)
		}
		resp := env.Do(apitest.Request{Method: http.MethodGet, Path: path + "/data", Token: tok, Header: acceptCSV})
		recs := readCSV(t, resp)
		if want := fmt.Sprintf(`attachment; filename="execution-%d-attempt-1-results.csv"`, acc.Data.ExecutionID); resp.Header.Get("Content-Disposition") != want {
			t.Errorf("Content-Disposition %q, want %q", resp.Header.Get("Content-Disposition"), want)
		}
		if len(recs) != 3 || strings.Join(recs[0], ",") != "row,id,email,first_name,last_name,status,message" {
			t.Fatalf("CSV %q", recs)
		}
		firsts := map[string]string{}
		for _, r := range recs[1:] {
			firsts[r[2]] = r[3]
			if r[4] != "'-minus" || r[5] != "success" {
				t.Errorf("row %q", r)
			}
		}
		if firsts["m0@example.com"] != "'=cmd|' /C calc'!A0" || firsts["m1@example.com"] != "Plain" {
			t.Errorf("first names %q", firsts)
		}
		other := env.NewOrg("Other")
		wantError(t, env.Do(apitest.Request{Method: http.MethodGet, Path: path + "/data", Token: env.Token(other, "svc.management.all"), Header: acceptCSV}), 404, "00000103", "")
		wantError(t, env.Do(apitest.Request{Method: http.MethodGet, Path: path + "/data?attempt=2", Token: tok, Header: acceptCSV}), 404, "00000103", "")
	})
}
