package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/secret/secrettest"
	"iam/models/store"
)

const totpSecret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP" //nolint:gosec // G101: a test's well-known example secret

// A CSV enrolls its users in chunks through the workflow; bad rows fail
// alone and the job ends WARNING with one result per row; secrets are
// stored sealed; a second upload keeps or replaces the data as asked.
func TestEnrollment_CSVEndToEnd(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		ctx := context.Background()
		users := seedUsers(t, db, env.Org, 30)
		ids := factorIDs(t, env, env.Org)
		tok := env.Token(env.Org, "svc.quick_enrollment.CREATE", "svc.job.READ")

		var b strings.Builder
		b.WriteString("Primary Email,Email Address,Mobile Number,TOTP Secret\n")
		for i := 1; i <= 25; i++ {
			fmt.Fprintf(&b, "USER%d@example.com,otp%d@example.com,+1 (415) 555-%04d,%s\n", i, i, i, totpSecret)
		}
		b.WriteString("nobody@example.com,otp@example.com,+14155550000," + totpSecret + "\n")  // row 26: unknown user
		b.WriteString("user26@example.com,not-an-email,+14155550026," + totpSecret + "\n")     // row 27
		b.WriteString("user27@example.com,otp27@example.com,0415,\n")                          // row 28: bad number, empty secret
		b.WriteString("user28@example.com,otp28@example.com,+14155550028,not*base32\n")        // row 29
		b.WriteString("user1@example.com,again@example.com,+14155550001," + totpSecret + "\n") // row 30: duplicate of row 1
		b.WriteString("user29@example.com,too,few\n")                                          // row 31
		b.WriteString("\n   \n")                                                               // blank: skipped
		b.WriteString("\"user30@example.com\",\"otp30@example.com\",\"+14155550030\",\"" + totpSecret + "\"")

		fields := [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP] + "," + ids[enrollment.FactorSMSOTP]},
			{"factor_configs", ids[enrollment.FactorTOTP]}, {"file_encoding", "utf-8"}, {"chunk_rows", "10"}}
		jobID := uploadCSV(t, env, tok, fields, b.String())
		job := env.WaitJob(env.Org, jobID, 2*time.Minute, finished)
		if job.Status != jobs.JobWarning || job.Processed != 32 || job.Total != 32 || job.SuccessCount != 26 || job.ErrorCount != 6 {
			t.Fatalf("job ended %s %d/%d, %d ok %d failed; want WARNING 32/32, 26 ok, 6 failed", job.Status, job.Processed, job.Total, job.SuccessCount, job.ErrorCount)
		}
		if job.Module != enrollment.EnrollmentModule || job.ActionName != enrollment.EnrollCSVAction {
			t.Errorf("job %s/%s", job.Module, job.ActionName)
		}
		results := allResults(t, env, jobID)
		if len(results) != 32 {
			t.Fatalf("%d results, want 32", len(results))
		}
		wantErr := map[int64]string{
			26: "no user of the organization has Primary Email",
			27: "Email Address is not an email address",
			28: "Mobile Number is not a phone number",
			29: "TOTP Secret is not base32",
			30: "the user is also in row 1",
			31: "the row has 3 fields; the header has 4",
		}
		for _, r := range results {
			want, bad := wantErr[r.Seq]
			switch {
			case bad && (r.Status != jobs.ResultError || !strings.Contains(r.Message, want)):
				t.Errorf("row %d: %s %q, want ERROR containing %q", r.Seq, r.Status, r.Message, want)
			case !bad && r.Status != jobs.ResultSuccess:
				t.Errorf("row %d: %s %q, want SUCCESS", r.Seq, r.Status, r.Message)
			}
		}
		if results[0].EntityID != models.FormatID(users[1]) || results[31].EntityID != models.FormatID(users[30]) {
			t.Errorf("rows 1 and 32 name users %s and %s", results[0].EntityID, results[31].EntityID)
		}

		// The data is stored, the secret sealed for its row only.
		es, err := store.NewStore(db).Enrollments.List(ctx, env.Org.ID, users[2])
		if err != nil || len(es) != 3 {
			t.Fatalf("user 2 has %d enrollments (%v), want 3", len(es), err)
		}
		for _, e := range es {
			switch e.FactorType {
			case enrollment.FactorEmailOTP:
				if e.Value != "otp2@example.com" {
					t.Errorf("email OTP value %q", e.Value)
				}
			case enrollment.FactorSMSOTP:
				if e.Value != "+14155550002" {
					t.Errorf("SMS OTP value %q, want E.164", e.Value)
				}
			case enrollment.FactorTOTP:
				if e.Value != "" || strings.Contains(string(e.Secret), totpSecret) {
					t.Fatalf("the TOTP secret is stored in the clear")
				}
				plain, err := secrettest.Box.Open(e.Secret, identity.EnrollmentSecretAAD(env.Org.ID, users[2], e.FactorConfigID))
				if err != nil || string(plain) != totpSecret {
					t.Errorf("sealed secret opens to %q (%v)", plain, err)
				}
				if _, err := secrettest.Box.Open(e.Secret, identity.EnrollmentSecretAAD(env.Org.ID, users[3], e.FactorConfigID)); err == nil {
					t.Error("a sealed secret opens for another user")
				}
			}
		}

		// GET /jobs/{id} shows the outcome and the first results.
		var view jobBody
		env.Get(fmt.Sprintf("/api/v1/jobs/%d", jobID), tok).JSON(t, &view)
		if view.Status != "WARNING" || view.Progress.Processed != 32 || len(view.Details.Result) != 32 || view.Details.ErrorCount != 6 {
			t.Errorf("GET job: %+v", view)
		}

		// Again without overwrite: nothing changes, every row says why.
		again := uploadCSV(t, env, tok, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}},
			"primary email,EMAIL ADDRESS\nuser1@example.com,changed@example.com\nuser29@example.com,new29@example.com\n")
		job = env.WaitJob(env.Org, again, time.Minute, finished)
		rs := allResults(t, env, again)
		if job.Status != jobs.JobWarning || rs[0].Status != jobs.ResultError || !strings.Contains(rs[0].Message, "already enrolled in Email OTP") || rs[1].Status != jobs.ResultSuccess {
			t.Errorf("no-overwrite job %s: %+v", job.Status, rs)
		}
		// With overwrite the data is replaced.
		over := uploadCSV(t, env, tok, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}, {"overwrite_enrollment_data", "true"}},
			"Primary Email,Email Address\nuser1@example.com,changed@example.com\n")
		if job := env.WaitJob(env.Org, over, time.Minute, finished); job.Status != jobs.JobCompleted {
			t.Errorf("overwrite job ended %s", job.Status)
		}
		es, _ = store.NewStore(db).Enrollments.List(ctx, env.Org.ID, users[1])
		for _, e := range es {
			if e.FactorType == enrollment.FactorEmailOTP && e.Value != "changed@example.com" {
				t.Errorf("overwrite kept %q", e.Value)
			}
		}
	})
}

// Every header problem answers 400 CSV_UPLOAD_FAILED with its causes, and
// nothing is stored.
func TestEnrollment_HeaderErrors(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	ids := factorIDs(t, env, env.Org)
	tok := env.Token(env.Org, "svc.quick_enrollment.WRITE")
	email, sms := ids[enrollment.FactorEmailOTP], ids[enrollment.FactorSMSOTP]
	cases := []struct {
		name, configs, encoding, file string
		causes                        []string
	}{
		{"duplicate", email, "", "Primary Email,Email Address,primary email\nu@x.io,a@x.io,u@x.io\n", []string{"DUPLICATE_COLUMNS"}},
		{"missing factor column", email + "," + sms, "", "Primary Email,Email Address\nu@x.io,a@x.io\n", []string{"MISSING_COLUMNS"}},
		{"missing user column", email, "", "Email Address\na@x.io\n", []string{"MISSING_COLUMNS"}},
		{"unknown", email, "", "Primary Email,Email Address,Shoe Size\nu@x.io,a@x.io,42\n", []string{"UNKNOWN_COLUMNS"}},
		{"unnamed", email, "", "Primary Email,Email Address,\nu@x.io,a@x.io,\n", []string{"UNKNOWN_COLUMNS"}},
		{"two user columns", email, "", "Primary Email,Employee ID,Email Address\nu@x.io,E1,a@x.io\n", []string{"AMBIGUOUS_USER_COLUMN"}},
		{"several at once", email + "," + sms, "", "Primary Email,Email Address,Email Address,Hat\nu,a,a,h\n", []string{"DUPLICATE_COLUMNS", "UNKNOWN_COLUMNS", "MISSING_COLUMNS"}},
		{"empty", email, "", "", []string{"EMPTY_FILE"}},
		{"blank", email, "", " \r\n\n", []string{"EMPTY_FILE"}},
		{"header only", email, "", "Primary Email,Email Address\n", []string{"EMPTY_FILE"}},
		{"not ascii", email, "US-ASCII", "Primary Email,Email Address\nj\xc3\xbcrgen@x.io,a@x.io\n", []string{"INVALID_ENCODING"}},
		{"not utf-8", email, "UTF-8", "Primary Email,Email Address\n\xff\xfe@x.io,a@x.io\n", []string{"INVALID_ENCODING"}},
		{"not shift_jis", email, "Shift_JIS", "Primary Email,Email Address\n\x81\x20@x.io,a@x.io\n", []string{"INVALID_ENCODING"}},
		{"bad quote", email, "", "Primary Email,\"Email Address\nu@x.io\n", []string{"MALFORMED_HEADER"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fields := [][2]string{{"factor_configs", tc.configs}}
			if tc.encoding != "" {
				fields = append(fields, [2]string{"file_encoding", tc.encoding})
			}
			resp := upload(t, env, "/api/v1/protection/quick-enrollment/upload-csv", tok, fields, "f.csv", []byte(tc.file))
			e := resp.ErrorBody(t)
			if resp.Status != http.StatusBadRequest || e.Code != "00000114" || e.Title != "CSV_UPLOAD_FAILED" {
				t.Fatalf("%d %s", resp.Status, resp.Body)
			}
			var got []string
			for _, c := range e.Causes {
				got = append(got, c.Title)
			}
			if strings.Join(got, ",") != strings.Join(tc.causes, ",") {
				t.Errorf("causes %v, want %v (%s)", got, tc.causes, resp.Body)
			}
		})
	}
	// Other mistakes of the form.
	for _, tc := range []struct {
		name   string
		fields [][2]string
		file   bool
		status int
		code   string
	}{
		{"no factor configs", nil, true, 400, "00000109"},
		{"unknown factor config", [][2]string{{"factor_configs", "12345"}}, true, 400, "00000109"},
		{"bad encoding", [][2]string{{"factor_configs", email}, {"file_encoding", "EBCDIC"}}, true, 400, "00000109"},
		// GBK and HZ-GB-2312 are what GB2312 resolves to, not names to give.
		{"resolved encoding GBK", [][2]string{{"factor_configs", email}, {"file_encoding", "gbk"}}, true, 400, "00000109"},
		{"resolved encoding HZ", [][2]string{{"factor_configs", email}, {"file_encoding", "HZ-GB-2312"}}, true, 400, "00000109"},
		{"bad boolean", [][2]string{{"factor_configs", email}, {"overwrite_enrollment_data", "maybe"}}, true, 400, "00000109"},
		{"no file", [][2]string{{"factor_configs", email}}, false, 400, "00000109"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := ""
			if tc.file {
				name = "f.csv"
			}
			resp := upload(t, env, "/api/v1/protection/quick-enrollment/upload-csv", tok, tc.fields, name, []byte("Primary Email,Email Address\nu@x.io,a@x.io\n"))
			if e := resp.ErrorBody(t); resp.Status != tc.status || e.Code != tc.code {
				t.Errorf("%d %s", resp.Status, resp.Body)
			}
		})
	}
	resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/quick-enrollment/upload-csv", Token: tok, Body: map[string]string{"a": "b"}})
	if resp.Status != http.StatusUnsupportedMediaType {
		t.Errorf("JSON body: %d", resp.Status)
	}
	if resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/quick-enrollment/upload-csv", Token: env.Token(env.Org, "svc.quick_enrollment.READ")}); resp.Status != http.StatusForbidden {
		t.Errorf("READ scope may upload: %d", resp.Status)
	}
	assertNothingStored(t, env.DB)
}

// assertNothingStored fails when any job or blob exists.
func assertNothingStored(t testing.TB, db bun.IDB) {
	t.Helper()
	for _, table := range []string{"jobs", "blobs", "blob_chunks"} {
		n, err := db.NewSelect().Table(table).Count(context.Background())
		if err != nil || n != 0 {
			t.Errorf("%s holds %d rows (%v), want none", table, n, err)
		}
	}
}

// The factor configs are seeded once per organization and name their CSV
// columns; the sample CSV has the matching header and an example row.
func TestEnrollment_FactorConfigsAndSampleCSV(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	tok := env.Token(env.Org, "svc.quick_enrollment.READ")
	var list struct {
		Data []struct {
			ID         string   `json:"id"`
			FactorType string   `json:"factor_type"`
			CSVColumns []string `json:"csv_columns"`
		} `json:"data"`
	}
	env.Get("/api/v1/protection/authnfactor-configs", tok).JSON(t, &list)
	if len(list.Data) != 4 || list.Data[0].FactorType != "EMAIL_OTP" || list.Data[3].FactorType != "SMART_CARD" || list.Data[2].CSVColumns[0] != "TOTP Secret" {
		t.Fatalf("configs: %+v", list.Data)
	}
	var again struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	env.Get("/api/v1/protection/authnfactor-configs", env.Token(env.Org, "svc.auth.READ")).JSON(t, &again)
	if len(again.Data) != 4 || again.Data[0].ID != list.Data[0].ID {
		t.Errorf("a second listing seeded anew: %+v", again.Data)
	}
	other := env.NewOrg("Other")
	var theirs struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	env.Get("/api/v1/protection/authnfactor-configs", env.Token(other, "svc.auth.ALL")).JSON(t, &theirs)
	if len(theirs.Data) != 4 || theirs.Data[0].ID == list.Data[0].ID {
		t.Errorf("organizations share configs")
	}

	resp := env.Get("/api/v1/protection/quick-enrollment/sample-csv?factor_configs="+list.Data[1].ID+","+list.Data[2].ID, tok)
	if resp.Status != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("sample: %d %s", resp.Status, resp.Header)
	}
	if got := string(resp.Body); got != "Primary Email,Mobile Number,TOTP Secret\njane.doe@example.com,+14155550123,"+totpSecret+"\n" {
		t.Errorf("sample CSV %q", got)
	}
	for _, q := range []string{"", "?factor_configs=", "?factor_configs=abc", "?factor_configs=" + theirs.Data[0].ID} {
		if r := env.Get("/api/v1/protection/quick-enrollment/sample-csv"+q, tok); r.Status != 400 || r.ErrorBody(t).Code != "00000107" {
			t.Errorf("sample%s: %d %s", q, r.Status, r.Body)
		}
	}
}

// The logon-script config has defaults, is replaced by PUT, changed by
// PATCH, and validated.
func TestEnrollment_LogonScriptConfig(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		read, write := env.Token(env.Org, "svc.quick_enrollment.READ"), env.Token(env.Org, "svc.quick_enrollment.UPDATE")
		path := "/api/v1/protection/quick-enrollment/logon-script-config"
		type cfg struct {
			WindowTitle        string `json:"window_title"`
			WindowContent      string `json:"window_content"`
			EnrollmentButton   string `json:"enrollment_button"`
			CancellationButton string `json:"cancellation_button"`
			ForceEnrollment    string `json:"force_enrollment"`
		}
		var got struct{ Data cfg }
		env.Get(path, read).JSON(t, &got)
		if got.Data.ForceEnrollment != "false" || got.Data.WindowTitle == "" {
			t.Errorf("defaults: %+v", got.Data)
		}
		full := cfg{"Enroll", "Please enroll", "Go", "Later", "true"}
		resp := env.Do(apitest.Request{Method: "PUT", Path: path, Token: write, Body: full})
		resp.JSON(t, &got)
		if resp.Status != 200 || got.Data != full {
			t.Fatalf("PUT: %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "PATCH", Path: path, Token: write, Body: map[string]string{"force_enrollment": "false"}})
		resp.JSON(t, &got)
		full.ForceEnrollment = "false"
		if resp.Status != 200 || got.Data != full {
			t.Fatalf("PATCH: %d %s", resp.Status, resp.Body)
		}
		env.Get(path, read).JSON(t, &got)
		if got.Data != full {
			t.Errorf("GET after PATCH: %+v", got.Data)
		}
		for _, bad := range []any{
			map[string]any{"force_enrollment": "yes"},
			map[string]any{"force_enrollment": true},
			map[string]any{"window_title": ""},
			map[string]any{"window_title": strings.Repeat("x", 201)},
			map[string]any{"colour": "red"},
		} {
			if r := env.Do(apitest.Request{Method: "PATCH", Path: path, Token: write, Body: bad}); r.Status != 400 {
				t.Errorf("PATCH %v: %d %s", bad, r.Status, r.Body)
			}
		}
		if r := env.Do(apitest.Request{Method: "PUT", Path: path, Token: write, Body: map[string]string{"window_title": "only"}}); r.Status != 400 {
			t.Errorf("partial PUT: %d", r.Status)
		}
		if r := env.Do(apitest.Request{Method: "PUT", Path: path, Token: read, Body: full}); r.Status != 403 {
			t.Errorf("PUT with READ: %d", r.Status)
		}
		env.Get(path, read).JSON(t, &got)
		if got.Data != full {
			t.Errorf("a refused write changed the config: %+v", got.Data)
		}
	})
}
