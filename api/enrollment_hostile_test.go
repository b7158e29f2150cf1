package api_test

// The hostile-input set: each case ends with a 4xx or a per-row error, and
// the service keeps answering other requests within a second meanwhile.

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/jobs"
	"iam/models/safezip/ziptest"
	"iam/models/sqldb"
)

const (
	csvPath   = "/api/v1/protection/quick-enrollment/upload-csv"
	cardsPath = "/api/v1/protection/quick-enrollment/upload-smartcards"
	// answerWithin is how soon the service must answer other requests while
	// a hostile one is under way: a third of a slow upload's 6 s, so that a
	// request waiting on a transaction held while a client sends cannot make
	// it, while a loaded machine under the race detector still does.
	answerWithin = 2 * time.Second
)

// whileServing runs fn while it asks GET /api/v1/jobs again and again, and
// fails when an answer is not 200 or takes longer than answerWithin.
func whileServing(t *testing.T, env *apitest.Env, fn func()) {
	t.Helper()
	tok := env.Token(env.Org, "svc.job.READ")
	stop, done := make(chan struct{}), make(chan struct{})
	var slowest time.Duration
	var asked int
	var failures []string
	go func() {
		defer close(done)
		client := &http.Client{Timeout: 10 * time.Second}
		for {
			req, _ := http.NewRequest(http.MethodGet, env.URL+"/api/v1/jobs", nil)
			req.Header.Set("Authorization", "Service-oauthtoken "+tok)
			began := time.Now()
			resp, err := client.Do(req)
			took := time.Since(began)
			asked++
			slowest = max(slowest, took)
			switch {
			case err != nil:
				failures = append(failures, err.Error())
			default:
				_, _ = io.Copy(io.Discard, resp.Body) // drained for the connection's reuse; the status is what is checked
				_ = resp.Body.Close()                 // only read: a close error tells the test nothing
				if resp.StatusCode != http.StatusOK {
					failures = append(failures, resp.Status)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	t.Logf("GET /jobs answered %d times meanwhile, the slowest in %v", asked, slowest)
	if asked == 0 || slowest > answerWithin || len(failures) > 0 {
		t.Errorf("while the hostile request ran, GET /jobs answered %d times, the slowest in %v (want within %v), failures %v",
			asked, slowest, answerWithin, failures)
	}
}

// postStream posts the multipart form write produces as it goes (a chunked
// body, never held whole), checks the answer against the contract and
// returns it (with status 0 when the request failed).
func postStream(t *testing.T, env *apitest.Env, path, tok string, write func(w *multipart.Writer) error) *apitest.Response {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := write(mw)
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest(http.MethodPost, env.URL+path, pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Service-oauthtoken "+tok)
	resp, err := http.DefaultClient.Do(req)
	pr.CloseWithError(io.ErrClosedPipe) // stop the writer if the server answered early
	if err != nil {
		// Errorf, not Fatalf: uploads run on goroutines of their own.
		t.Errorf("POST %s: %v", path, err)
		return &apitest.Response{}
	}
	defer func() { _ = resp.Body.Close() }() // only read: a close error tells the test nothing
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("read answer: %v", err)
		return &apitest.Response{}
	}
	apitest.CheckResponse(t, req, resp, body)
	return &apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// formWithFileFirst is a form whose file part comes before its fields.
func formWithFileFirst(t *testing.T, fields [][2]string, fileName string, file []byte) ([]byte, string) {
	t.Helper()
	var b strings.Builder
	w := multipart.NewWriter(&b)
	fw, err := w.CreateFormFile("file", fileName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(file); err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if err := w.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String()), w.FormDataContentType()
}

// Both upload routes take the form's parts in any order (curl -F keeps the
// order given, and the spec lists the file first).
func TestHostile_FormPartsInAnyOrder(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	seedUsers(t, env.DB, env.Org, 2)
	ids := factorIDs(t, env, env.Org)
	tok := env.Token(env.Org, "svc.quick_enrollment.CREATE")
	csv := []byte("Primary Email,Email Address\nuser1@example.com,otp1@example.com\n")
	archive := zipOf(t, zipFile{"user1@example.com.cer", newCert(t, "User One", time.Now().Add(24*time.Hour))})
	cases := []struct {
		path, name string
		fields     [][2]string
		file       []byte
	}{
		{csvPath, "users.csv", [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}, {"file_encoding", "UTF-8"}, {"chunk_rows", "10"}}, csv},
		{cardsPath, "cards.zip", [][2]string{{"certificate_filename_pattern", "Primary Email"}, {"factor_configs", ids[enrollment.FactorSmartCard]}}, archive},
	}
	for _, tc := range cases {
		for _, fileFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/file first %v", tc.path[strings.LastIndex(tc.path, "/")+1:], fileFirst), func(t *testing.T) {
				body, ct := form(t, tc.fields, tc.name, tc.file)
				if fileFirst {
					body, ct = formWithFileFirst(t, tc.fields, tc.name, tc.file)
				}
				resp := env.Do(apitest.Request{Method: http.MethodPost, Path: tc.path, Token: tok, Body: body, Header: http.Header{"Content-Type": {ct}}})
				if resp.Status != http.StatusAccepted {
					t.Fatalf("%d %s", resp.Status, resp.Body)
				}
				var acc acceptedBody
				resp.JSON(t, &acc)
				id, _ := models.ParseID("id", acc.Data.ID)
				job, err := env.Store.Jobs.Get(context.Background(), env.Org.ID, id)
				if err != nil {
					t.Fatal(err)
				}
				// The fields were read, whatever their place.
				if tc.path == csvPath && !strings.Contains(string(job.Input), `"chunk_rows":10`) ||
					tc.path == cardsPath && !strings.Contains(string(job.Input), `"certificate_filename_pattern":"Primary Email"`) {
					t.Errorf("job input %s", job.Input)
				}
			})
		}
	}
	// A form with two files is refused.
	body, ct := formWithFileFirst(t, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}, {"file", "again"}}, "users.csv", csv)
	resp := env.Do(apitest.Request{Method: http.MethodPost, Path: csvPath, Token: tok, Body: body, Header: http.Header{"Content-Type": {ct}}})
	if resp.Status != http.StatusBadRequest {
		t.Errorf("two file parts: %d %s", resp.Status, resp.Body)
	}
}

// 100,000 form fields, or fields too large together, are refused with 400
// after the first few, without reading the rest.
func TestHostile_ManyFormFields(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	ids := factorIDs(t, env, env.Org)
	tok := env.Token(env.Org, "svc.quick_enrollment.CREATE")
	for _, path := range []string{csvPath, cardsPath} {
		whileServing(t, env, func() {
			resp := postStream(t, env, path, tok, func(w *multipart.Writer) error {
				for i := range 100_000 {
					if err := w.WriteField(fmt.Sprintf("f%d", i), "x"); err != nil {
						return err
					}
				}
				return nil
			})
			if e := resp.ErrorBody(t); resp.Status != http.StatusBadRequest || !strings.Contains(e.Detail, "more than 64 parts") {
				t.Errorf("%s, 100,000 fields: %d %s", path, resp.Status, resp.Body)
			}
		})
	}
	big := strings.Repeat("1", 60<<10)
	resp := postStream(t, env, csvPath, tok, func(w *multipart.Writer) error {
		if err := w.WriteField("factor_configs", ids[enrollment.FactorEmailOTP]); err != nil {
			return err
		}
		for range 5 {
			if err := w.WriteField("note", big); err != nil {
				return err
			}
		}
		return nil
	})
	if e := resp.ErrorBody(t); resp.Status != http.StatusBadRequest || !strings.Contains(e.Detail, "text fields hold more than") {
		t.Errorf("300 KiB of fields: %d %s", resp.Status, resp.Body)
	}
	assertNothingStored(t, env.DB)
}

// A ZIP whose end record declares 5 entries while its directory holds
// 196,613 is refused (400) before the directory is parsed.
func TestHostile_ZIPWithALyingEntryCount(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	tok := env.Token(env.Org, "svc.quick_enrollment.CREATE")
	archive := ziptest.LyingArchive(3<<16+5, false)
	whileServing(t, env, func() {
		resp := upload(t, env, cardsPath, tok, [][2]string{{"certificate_filename_pattern", "Primary Email"}}, "cards.zip", archive)
		if e := resp.ErrorBody(t); resp.Status != http.StatusBadRequest || !strings.Contains(e.Detail, "more than 10000 entries") {
			t.Errorf("%d %s", resp.Status, resp.Body)
		}
	})
	assertNothingStored(t, env.DB)
}

// repeatByte is an endless stream of one byte.
type repeatByte byte

func (r repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// A CSV record of 1 GiB of line feeds in quotes, streamed through the HTTP
// path, is refused with 413 at the upload limit (256 MiB) without being
// held; one of 8 MiB, under the limit, fails its row alone and the job
// reads the rows after it (the reader's own test reads a 1 GiB record).
func TestHostile_HugeQuotedRecord(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		seedUsers(t, db, env.Org, 3)
		ids := factorIDs(t, env, env.Org)
		tok := env.Token(env.Org, "svc.quick_enrollment.CREATE", "svc.job.READ")
		withRecord := func(size int64) func(w *multipart.Writer) error {
			return func(w *multipart.Writer) error {
				if err := w.WriteField("factor_configs", ids[enrollment.FactorEmailOTP]); err != nil {
					return err
				}
				if err := w.WriteField("chunk_rows", "10"); err != nil {
					return err
				}
				fw, err := w.CreateFormFile("file", "users.csv")
				if err != nil {
					return err
				}
				_, err = io.Copy(fw, io.MultiReader(
					strings.NewReader("Primary Email,Email Address\nuser1@example.com,otp1@example.com\nuser2@example.com,\""),
					io.LimitReader(repeatByte('\n'), size),
					strings.NewReader("\"\nuser3@example.com,otp3@example.com\n")))
				return err
			}
		}
		if db.Dialect().Name().String() == "sqlite" { // the HTTP path is the same on both
			whileServing(t, env, func() {
				began := time.Now()
				resp := postStream(t, env, csvPath, tok, withRecord(1<<30))
				t.Logf("1 GiB streamed: %d after %v", resp.Status, time.Since(began))
				if resp.Status != http.StatusRequestEntityTooLarge {
					t.Errorf("1 GiB: %d %s", resp.Status, resp.Body)
				}
			})
			assertNothingStored(t, db)
		}

		began := time.Now()
		resp := postStream(t, env, csvPath, tok, withRecord(8<<20))
		if resp.Status != http.StatusAccepted {
			t.Fatalf("8 MiB record: %d %s", resp.Status, resp.Body)
		}
		var acc acceptedBody
		resp.JSON(t, &acc)
		id, _ := models.ParseID("id", acc.Data.ID)
		job := env.WaitJob(env.Org, id, 2*time.Minute, finished)
		t.Logf("8 MiB record: job %s in %v", job.Status, time.Since(began))
		rs := allResults(t, env, id)
		if job.Status != jobs.JobWarning || len(rs) != 3 || rs[0].Status != jobs.ResultSuccess ||
			rs[1].Status != jobs.ResultError || !strings.Contains(rs[1].Message, "the row is longer than") ||
			rs[2].Status != jobs.ResultSuccess || rs[2].Seq != 3 {
			t.Errorf("job %s, results %+v", job.Status, rs)
		}
	})
}

// Slow uploads hold no database connection and no transaction while their
// client sends: with more of them under way than the PostgreSQL pool has
// connections (SQLite: one writer at a time), other requests, reads and
// writes, answer within a second, and every upload ends accepted. A stalled
// upload is cut after the idle timeout, leaving nothing.
func TestHostile_SlowUploadsDoNotHoldTheDatabase(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		const uploads = 34
		if sqldb.IsPostgres(db) {
			db.SetMaxOpenConns(16) // fewer connections than uploads
		}
		// The idle limit is eight times the slow uploads' pause, so that a
		// loaded machine does not make a slow upload look stalled.
		const idle = 4 * time.Second
		env := apitest.New(t, db, apitest.Options{UploadIdleTimeout: idle})
		ids := factorIDs(t, env, env.Org)
		tok := env.Token(env.Org, "svc.quick_enrollment.CREATE")
		var head strings.Builder
		head.WriteString("Primary Email,Email Address\n")
		for i := 0; head.Len() < 1100<<10; i++ { // past the 1 MiB the header check reads
			fmt.Fprintf(&head, "user%d@example.com,otp%d@example.com\n", i, i)
		}
		slow := func(w *multipart.Writer) error {
			if err := w.WriteField("factor_configs", ids[enrollment.FactorEmailOTP]); err != nil {
				return err
			}
			fw, err := w.CreateFormFile("file", "slow.csv")
			if err != nil {
				return err
			}
			if _, err := io.WriteString(fw, head.String()); err != nil {
				return err
			}
			for i := range 12 { // 12 rows, one every 500 ms: 6 s
				time.Sleep(500 * time.Millisecond)
				if _, err := fmt.Fprintf(fw, "late%d@example.com,otp@example.com\n", i); err != nil {
					return err
				}
			}
			return nil
		}
		statuses := make(chan int, uploads)
		var wg sync.WaitGroup
		for range uploads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses <- postStream(t, env, csvPath, tok, slow).Status
			}()
		}
		time.Sleep(time.Second) // the uploads are under way, past their first MiB
		whileServing(t, env, func() {
			// A write: a small upload goes through while the slow ones send.
			for range 3 {
				began := time.Now()
				resp := upload(t, env, csvPath, tok, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}}, "quick.csv", []byte("Primary Email,Email Address\nu@x.io,a@x.io\n"))
				if took := time.Since(began); resp.Status != http.StatusAccepted || took > answerWithin {
					t.Errorf("a small upload beside the slow ones: %d after %v", resp.Status, took)
				}
				time.Sleep(300 * time.Millisecond)
			}
		})
		wg.Wait()
		close(statuses)
		for s := range statuses {
			if s != http.StatusAccepted {
				t.Errorf("a slow upload ended %d", s)
			}
		}
		var jobs int
		if err := db.NewSelect().Table("jobs").ColumnExpr("count(*)").Scan(context.Background(), &jobs); err != nil {
			t.Fatal(err)
		}
		if jobs != uploads+3 {
			t.Errorf("%d jobs, want %d", jobs, uploads+3)
		}

		// A stalled upload: the server cuts it after the idle timeout.
		began := time.Now()
		resp := postStream(t, env, csvPath, tok, func(w *multipart.Writer) error {
			if err := w.WriteField("factor_configs", ids[enrollment.FactorEmailOTP]); err != nil {
				return err
			}
			fw, _ := w.CreateFormFile("file", "stalled.csv")
			if _, err := io.WriteString(fw, head.String()); err != nil {
				return err
			}
			time.Sleep(3 * idle)
			return nil
		})
		took := time.Since(began)
		if e := resp.ErrorBody(t); resp.Status != http.StatusBadRequest || !strings.Contains(e.Detail, "stalled") || took > 2*idle+time.Second {
			t.Errorf("a stalled upload: %d %s after %v", resp.Status, resp.Body, took)
		}
		var after int
		if err := db.NewSelect().Table("jobs").ColumnExpr("count(*)").Scan(context.Background(), &after); err != nil {
			t.Fatal(err)
		}
		if after != jobs {
			t.Errorf("the stalled upload left a job")
		}
	})
}
