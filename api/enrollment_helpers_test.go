package api_test

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/enrollment"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/sqldb"
)

// testUser is the slice of the users table the enrollment tests fill.
type testUser struct {
	bun.BaseModel `bun:"table:users"`

	ID           int64     `bun:"id,pk"`
	OrgID        int64     `bun:"org_id"`
	Email        string    `bun:"email"`
	EmployeeID   string    `bun:"employee_id"`
	MobileNumber string    `bun:"mobile_number"`
	CreatedAt    time.Time `bun:"created_at"`
	UpdatedAt    time.Time `bun:"updated_at"`
}

// seedUsers creates n users of org: user<i>@example.com, employee E<i>,
// mobile +1555<i, 7 digits>, for i from 1 to n. It returns their ids by i.
func seedUsers(t testing.TB, db bun.IDB, org *identity.Organization, n int) map[int]int64 {
	t.Helper()
	ids := make(map[int]int64, n)
	now := time.Now().UTC()
	const batch = 2000
	for start := 1; start <= n; start += batch {
		var users []testUser
		for i := start; i < start+batch && i <= n; i++ {
			u := testUser{ID: sqldb.NewID(), OrgID: org.ID, Email: fmt.Sprintf("user%d@example.com", i),
				EmployeeID: fmt.Sprintf("E%d", i), MobileNumber: fmt.Sprintf("+1555%07d", i), CreatedAt: now, UpdatedAt: now}
			ids[i] = u.ID
			users = append(users, u)
		}
		if _, err := db.NewInsert().Model(&users).Exec(context.Background()); err != nil {
			t.Fatalf("seed users: %v", err)
		}
	}
	return ids
}

// form builds a multipart body: fields in order, then the file part.
func form(t testing.TB, fields [][2]string, fileName string, file []byte) (body []byte, contentType string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, f := range fields {
		if err := w.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if fileName != "" {
		fw, err := w.CreateFormFile("file", fileName)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(file); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w.FormDataContentType()
}

// factorIDs returns the org's factor config ids by type.
func factorIDs(t testing.TB, env *apitest.Env, org *identity.Organization) map[enrollment.FactorType]string {
	t.Helper()
	configs, err := env.Store.Factors.List(context.Background(), org.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[enrollment.FactorType]string{}
	for _, c := range configs {
		out[c.Type] = models.FormatID(c.ID)
	}
	return out
}

type acceptedBody struct {
	Data struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"data"`
	Links struct {
		Status struct {
			Href string `json:"href"`
		} `json:"status"`
	} `json:"links"`
}

// upload posts a form to path and returns the response.
func upload(t testing.TB, env *apitest.Env, path, token string, fields [][2]string, fileName string, file []byte) *apitest.Response {
	t.Helper()
	body, ct := form(t, fields, fileName, file)
	return env.Do(apitest.Request{Method: http.MethodPost, Path: path, Token: token, Body: body,
		Header: http.Header{"Content-Type": {ct}}})
}

// uploadCSV posts a CSV and expects 202; it returns the job id.
func uploadCSV(t testing.TB, env *apitest.Env, token string, fields [][2]string, csv string) int64 {
	t.Helper()
	resp := upload(t, env, "/api/v1/protection/quick-enrollment/upload-csv", token, fields, "users.csv", []byte(csv))
	if resp.Status != http.StatusAccepted {
		t.Fatalf("upload: %d %s", resp.Status, resp.Body)
	}
	var acc acceptedBody
	resp.JSON(t, &acc)
	id, err := models.ParseID("id", acc.Data.ID)
	if err != nil || acc.Links.Status.Href != "/jobs/"+acc.Data.ID || !strings.HasSuffix(resp.Header.Get("Location"), "/jobs/"+acc.Data.ID) {
		t.Fatalf("job response %s, Location %q", resp.Body, resp.Header.Get("Location"))
	}
	return id
}

// allResults pages through a job's results.
func allResults(t testing.TB, env *apitest.Env, jobID int64) []jobs.JobResult {
	t.Helper()
	var out []jobs.JobResult
	for from := 0; ; from += 1000 {
		page, err := env.Store.Jobs.Results(context.Background(), jobID, "", from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out
		}
	}
}
