package api_test

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api"
	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/management"
)

const mgmtBase = "/api/v1/management/actions/"

// TestManagement_RouteScopes is the route × scope table of the management
// routes (spec 4.5): the routes carry exactly these scopes, a token with
// another resource's ALL is refused on each, and each listed scope alone
// passes the scope check.
func TestManagement_RouteScopes(t *testing.T) {
	read := []string{"svc.management.READ", "svc.management.ALL"}
	want := map[string][]string{
		"GET /management/actions/:action_id/data":                            read,
		"GET /management/actions/:action_id/view-columns":                    read,
		"PUT /management/actions/:action_id/view-columns":                    {"svc.management.WRITE", "svc.management.UPDATE", "svc.management.ALL"},
		"POST /management/actions/:action_id/execute":                        {"svc.management.WRITE", "svc.management.ALL"},
		"POST /management/actions/:action_id/uploads":                        {"svc.management.WRITE", "svc.management.CREATE", "svc.management.ALL"},
		"GET /management/actions/:action_id/uploads/:upload_id":              read,
		"GET /management/actions/:action_id/uploads/:upload_id/data":         read,
		"DELETE /management/actions/:action_id/uploads/:upload_id/data":      {"svc.management.WRITE", "svc.management.DELETE", "svc.management.ALL"},
		"GET /management/actions/:action_id/executions/:execution_id/status": read,
		"GET /management/actions/:action_id/executions/:execution_id":        read,
		"GET /management/actions/:action_id/executions/:execution_id/data":   read,
		"POST /management/actions/:action_id/executions/:execution_id/retry": {"svc.management.WRITE", "svc.management.ALL"},
	}
	got := map[string][]string{}
	for _, rt := range api.New(api.Config{}, api.Deps{}).Routes() {
		if strings.HasPrefix(rt.Path, "/management/") {
			got[rt.Method+" "+rt.Path] = rt.Scopes
		}
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("%s scopes %v, want %v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d management routes, the table has %d", len(got), len(want))
	}
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		for k, scopes := range want {
			method, path, _ := strings.Cut(k, " ")
			path = strings.NewReplacer(":action_id", "delete-users", ":upload_id", "1", ":execution_id", "1").Replace(path)
			req := apitest.Request{Method: method, Path: "/api/v1" + path, Body: map[string]any{}}
			if method == "PUT" {
				req.Body = []string{"email"}
			}
			for _, other := range []string{"svc.user.ALL", "svc.job.ALL", "svc.management.none"} {
				req.Token = env.Token(env.Org, other)
				if resp := env.Do(req); resp.Status != http.StatusForbidden {
					t.Errorf("%s with %s: %d, want 403", k, other, resp.Status)
				}
			}
			for _, s := range scopes {
				req.Token = env.Token(env.Org, s)
				if resp := env.Do(req); resp.Status == http.StatusForbidden || resp.Status == http.StatusUnauthorized {
					t.Errorf("%s with %s: %d, want past the scope check", k, s, resp.Status)
				}
			}
		}
	})
}

// csvUpload is a multipart body with the file after the encoding field
// when fileLast (parts in any order).
func csvUpload(t *testing.T, csv []byte, encoding string, fileLast bool) ([]byte, http.Header) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	writeFile := func() {
		fw, err := w.CreateFormFile("file", "users.csv")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(csv); err != nil {
			t.Fatal(err)
		}
	}
	if !fileLast {
		writeFile()
	}
	if encoding != "" {
		if err := w.WriteField("file_encoding", encoding); err != nil {
			t.Fatal(err)
		}
	}
	if fileLast {
		writeFile()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), http.Header{"Content-Type": {w.FormDataContentType()}}
}

type mgmtUploadBody struct {
	Data struct {
		ID     int64 `json:"id"`
		Header []struct {
			Name          string `json:"name"`
			IsMatchColumn bool   `json:"is_match_column"`
		} `json:"header"`
		MatchColumns []string `json:"match_columns"`
		RowCount     int64    `json:"row_count"`
	} `json:"data"`
}

type mgmtRowsBody struct {
	Data []struct {
		ID           string            `json:"id"`
		UserID       string            `json:"user_id"`
		Status       string            `json:"status"`
		Message      string            `json:"message"`
		ImportedData map[string]string `json:"imported_data"`
	} `json:"data"`
	Meta struct {
		StartIndex string `json:"start_index"`
		Limit      int    `json:"limit"`
		Total      int    `json:"total_no_of_objects"`
	} `json:"meta"`
}

type mgmtAccepted struct {
	Data struct {
		ExecutionID int64  `json:"execution_id"`
		JobID       string `json:"job_id"`
		Status      string `json:"status"`
		Attempt     int    `json:"attempt"`
	} `json:"data"`
	Links map[string]struct {
		Href string `json:"href"`
	} `json:"links"`
}

func TestManagement_UploadSelectAndExecute(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.management.all")
		ctx := t.Context()
		var users []*identity.User
		for i := range 4 {
			u := &identity.User{OrgID: env.Org.ID, Email: fmt.Sprintf("u%d@example.com", i), FirstName: fmt.Sprintf("F%d", i),
				EmployeeID: fmt.Sprintf("E%d", i), Status: 1, Department: "Sales"}
			if err := env.Store.Users.Create(ctx, u, ""); err != nil {
				t.Fatal(err)
			}
			users = append(users, u)
		}

		// View columns: default, replaced, refused.
		var cols struct{ Data []string }
		env.Get(mgmtBase+"move-users/view-columns", tok).JSON(t, &cols)
		if !slices.Equal(cols.Data, management.DefaultViewColumns(management.ActionMoveUsers)) {
			t.Errorf("default columns = %v", cols.Data)
		}
		resp := env.Do(apitest.Request{Method: "PUT", Path: mgmtBase + "move-user/view-columns", Token: tok, Body: []string{"email", "department"}})
		resp.JSON(t, &cols)
		if resp.Status != 200 || !slices.Equal(cols.Data, []string{"email", "department"}) {
			t.Errorf("PUT columns (alias path): %d %s", resp.Status, resp.Body)
		}
		wantError(t, env.Do(apitest.Request{Method: "PUT", Path: mgmtBase + "move-users/view-columns", Token: tok, Body: []string{"nope"}}),
			400, "00000109", "not a user attribute")
		wantError(t, env.Get(mgmtBase+"disable-users/view-columns", tok), 404, "00000103", "move-users and delete-users")

		// Upload: the file after the encoding field, Latin-1.
		csv := []byte("Employee ID,Note\nE1,caf\xe9\nE9,x\nE1,dup\n,empty\nE2,y\n")
		body, h := csvUpload(t, csv, "ISO-8859-1", true)
		resp = env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "move-users/uploads", Token: tok, Body: body, Header: h})
		if resp.Status != http.StatusCreated {
			t.Fatalf("upload: %d %s", resp.Status, resp.Body)
		}
		var up mgmtUploadBody
		resp.JSON(t, &up)
		if up.Data.RowCount != 5 || !slices.Equal(up.Data.MatchColumns, []string{"Employee ID"}) || !up.Data.Header[0].IsMatchColumn || up.Data.Header[1].IsMatchColumn {
			t.Errorf("upload = %s", resp.Body)
		}
		uid := fmt.Sprint(up.Data.ID)
		var got mgmtUploadBody
		env.Get(mgmtBase+"move-users/uploads/"+uid, tok).JSON(t, &got)
		if got.Data.ID != up.Data.ID {
			t.Errorf("GET upload = %+v", got)
		}
		var rows mgmtRowsBody
		env.Get(mgmtBase+"move-users/uploads/"+uid+"/data", tok).JSON(t, &rows)
		statuses := []string{}
		for _, r := range rows.Data {
			statuses = append(statuses, r.Status)
		}
		if !slices.Equal(statuses, []string{"MAPPED", "NOT_FOUND", "DUPLICATE_USER", "INVALID", "MAPPED"}) ||
			rows.Data[0].ImportedData["Note"] != "café" || rows.Data[0].UserID != models.FormatID(users[1].ID) ||
			rows.Meta.StartIndex != "0" || rows.Meta.Limit != 200 || rows.Meta.Total != 5 {
			t.Errorf("rows = %+v", rows)
		}
		env.Get(mgmtBase+"move-users/uploads/"+uid+"/data?filter="+url.QueryEscape(`status eq "MAPPED"`), tok).JSON(t, &rows)
		if len(rows.Data) != 2 {
			t.Errorf("MAPPED rows = %+v", rows.Data)
		}
		// Another action or organization does not see the upload.
		wantError(t, env.Get(mgmtBase+"delete-users/uploads/"+uid, tok), 404, "00000103", "")
		other := env.Token(env.NewOrg("Other"), "svc.management.all")
		wantError(t, env.Get(mgmtBase+"move-users/uploads/"+uid+"/data", other), 404, "00000103", "")

		// $is_selected follows the latest upload's MAPPED rows.
		var data struct {
			Data []struct {
				ID         string         `json:"id"`
				IsSelected bool           `json:"$is_selected"`
				Columns    map[string]any `json:"columns"`
			} `json:"data"`
			Meta struct {
				StartIndex string `json:"start_index"`
				Limit      int    `json:"limit"`
			} `json:"meta"`
		}
		env.Get(mgmtBase+"move-users/data?sort=email", tok).JSON(t, &data)
		if len(data.Data) != 4 || data.Meta.StartIndex != "0" || data.Meta.Limit != 200 {
			t.Fatalf("data = %+v", data)
		}
		for i, e := range data.Data {
			if e.IsSelected != (i == 1 || i == 2) || e.Columns["department"] != "Sales" || len(e.Columns) != 2 {
				t.Errorf("entity %d = %+v", i, e)
			}
		}
		env.Get(mgmtBase+"delete-users/data", tok).JSON(t, &data)
		for _, e := range data.Data {
			if e.IsSelected {
				t.Errorf("delete-users has no upload, yet %s is selected", e.ID)
			}
		}

		// Delete rows: by ids (one missing), then by filter.
		var del struct {
			Data struct {
				DeletedCount int `json:"deleted_count"`
				Results      []struct {
					ResourceID string `json:"resource_id"`
					Status     int    `json:"status"`
				} `json:"results"`
			} `json:"data"`
		}
		resp = env.Do(apitest.Request{Method: "DELETE", Path: mgmtBase + "move-users/uploads/" + uid + "/data?ids=2,77", Token: tok})
		resp.JSON(t, &del)
		if resp.Status != 200 || del.Data.DeletedCount != 1 || del.Data.Results[0].Status != 204 || del.Data.Results[1].Status != 404 {
			t.Errorf("delete by ids: %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "DELETE", Path: mgmtBase + "move-users/uploads/" + uid + "/data?filter=" + url.QueryEscape(`status eq "INVALID"`), Token: tok})
		resp.JSON(t, &del)
		if resp.Status != 200 || del.Data.DeletedCount != 1 || len(del.Data.Results) != 0 {
			t.Errorf("delete by filter: %d %s", resp.Status, resp.Body)
		}
		wantError(t, env.Do(apitest.Request{Method: "DELETE", Path: mgmtBase + "move-users/uploads/" + uid + "/data", Token: tok}), 400, "00000107", "ids")

		// Execute: refused selections, then the upload.
		for _, c := range []struct {
			body   map[string]any
			status int
			code   string
			detail string
		}{
			{map[string]any{"upload_id": uid}, 400, "00000109", "target_container"},
			{map[string]any{"upload_id": uid, "target_container": "OU=a, DC=b"}, 400, "00000109", "RFC 4514"},
			{map[string]any{"upload_id": uid, "user_ids": []string{"1"}, "target_container": "OU=x"}, 400, "00000109", "exactly one"},
			{map[string]any{"filter": `email eq "none"`, "target_container": "OU=x"}, 400, "00000109", "no users"},
			{map[string]any{"upload_id": "123", "target_container": "OU=x"}, 404, "00000103", ""},
			{map[string]any{"user_ids": []string{"abc"}, "target_container": "OU=x"}, 400, "00000109", "user_ids"},
			{map[string]any{"what": 1}, 400, "00000109", "what"},
		} {
			wantError(t, env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "move-users/execute", Token: tok, Body: c.body}), c.status, c.code, c.detail)
		}
		resp = env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "move-users/execute", Token: tok,
			Body: map[string]any{"upload_id": uid, "target_container": "OU=New,DC=example,DC=com"}})
		if resp.Status != http.StatusAccepted {
			t.Fatalf("execute: %d %s", resp.Status, resp.Body)
		}
		var acc mgmtAccepted
		resp.JSON(t, &acc)
		eid := fmt.Sprint(acc.Data.ExecutionID)
		if acc.Data.Status != "yet_to_start" || acc.Data.Attempt != 1 || acc.Links["job"].Href != "/api/v1/jobs/"+acc.Data.JobID ||
			acc.Links["execution"].Href != "/api/v1/management/actions/move-users/executions/"+eid || resp.Header.Get("Location") != acc.Links["execution"].Href {
			t.Errorf("accepted = %s", resp.Body)
		}
		job, err := env.Store.Jobs.Get(ctx, env.Org.ID, mustID(t, acc.Data.JobID))
		if err != nil || job.Module != "Management" || job.Status != jobs.JobQueued || job.Total != 2 {
			t.Errorf("job = %+v, %v", job, err)
		}
		var status struct{ Data string }
		env.Get(mgmtBase+"move-users/executions/"+eid+"/status", tok).JSON(t, &status)
		if status.Data != "yet_to_start" {
			t.Errorf("status = %q", status.Data)
		}
		var exec struct {
			Data struct {
				ID          int64                    `json:"id"`
				Total       int64                    `json:"total"`
				FailedCount int64                    `json:"failed_count"`
				CreatedBy   string                   `json:"created_by"`
				SummaryData []struct{ Label string } `json:"summary_data"`
				Attempts    []struct{ Attempt int }  `json:"attempts"`
				Selection   map[string]any           `json:"selection"`
			} `json:"data"`
		}
		env.Get(mgmtBase+"move-users/executions/"+eid, tok).JSON(t, &exec)
		if exec.Data.Total != 2 || len(exec.Data.Attempts) != 1 || exec.Data.Selection["upload_id"] != uid || len(exec.Data.SummaryData) == 0 {
			t.Errorf("execution = %+v", exec.Data)
		}
		var results mgmtRowsBody
		env.Get(mgmtBase+"move-users/executions/"+eid+"/data", tok).JSON(t, &results)
		if len(results.Data) != 0 || results.Meta.StartIndex != "0" {
			t.Errorf("results before the job ran = %+v", results)
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "move-users/executions/" + eid + "/retry", Token: tok}), 409, "00000105", "yet_to_start")
		wantError(t, env.Get(mgmtBase+"delete-users/executions/"+eid, tok), 404, "00000103", "")
		wantError(t, env.Get(mgmtBase+"move-users/executions/"+eid+"/status", other), 404, "00000103", "")
		wantError(t, env.Get(mgmtBase+"move-users/executions/"+eid+"/data?attempt=0", tok), 400, "00000107", "attempt")

		// Deleting the job interrupts the execution, which may then be retried.
		if resp = env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/jobs/" + acc.Data.JobID, Token: env.Token(env.Org, "svc.job.ALL")}); resp.Status != 204 {
			t.Fatalf("delete job: %d", resp.Status)
		}
		env.Get(mgmtBase+"move-users/executions/"+eid+"/status", tok).JSON(t, &status)
		if status.Data != "interrupted" {
			t.Errorf("status after the job was deleted = %q", status.Data)
		}
		resp = env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "move-users/executions/" + eid + "/retry", Token: tok})
		resp.JSON(t, &acc)
		if resp.Status != 202 || acc.Data.Attempt != 2 || acc.Data.Status != "yet_to_start" {
			t.Errorf("retry of an interrupted execution: %d %s", resp.Status, resp.Body)
		}
	})
}

func TestManagement_UploadRefused(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.management.write")
		for _, c := range []struct {
			name, csv, enc string
			status         int
			code, detail   string
		}{
			{"no match column", "Department\nSales\n", "", 400, "00000114", "NO_MATCH_COLUMN"},
			{"duplicate columns", "Primary Email,primary email\na@b.c,a@b.c\n", "", 400, "00000114", "DUPLICATE_COLUMNS"},
			{"empty", "", "", 400, "00000114", "EMPTY_FILE"},
			{"bad encoding", "Primary Email\na@b.c\n", "EBCDIC", 400, "00000109", "file_encoding"},
			// GBK and HZ-GB-2312 are what GB2312 resolves to, not names to give.
			{"resolved encoding GBK", "Primary Email\na@b.c\n", "gbk", 400, "00000109", "file_encoding"},
			{"resolved encoding HZ", "Primary Email\na@b.c\n", "HZ-GB-2312", 400, "00000109", "file_encoding"},
		} {
			t.Run(c.name, func(t *testing.T) {
				body, h := csvUpload(t, []byte(c.csv), c.enc, false)
				wantError(t, env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "delete-users/uploads", Token: tok, Body: body, Header: h}), c.status, c.code, c.detail)
			})
		}
		big := "Primary Email\n" + strings.Repeat("a@b.c\n", management.MaxUploadRows+1)
		body, h := csvUpload(t, []byte(big), "", false)
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "delete-users/uploads", Token: tok, Body: body, Header: h}), 400, "00000109", "rows")
		huge := bytes.Repeat([]byte("x"), 33<<20)
		body, h = csvUpload(t, huge, "", false)
		if resp := env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "delete-users/uploads", Token: tok, Body: body, Header: h}); resp.Status != 413 {
			t.Errorf("a 33 MiB upload: %d, want 413", resp.Status)
		}
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "delete-users/uploads", Token: tok, Body: "x",
			Header: http.Header{"Content-Type": {"text/csv"}}}), 415, "00000111", "")
	})
}
