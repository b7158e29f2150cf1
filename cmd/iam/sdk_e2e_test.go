package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"iam/client"
	"iam/models/identity"
)

// TestSDK_TokenUploadWaitAndPage runs the flow of the SDK example against
// `iam dev`: an application registered with `iam clients create` gets a token
// with golang.org/x/oauth2 from the service's own authorization server (the
// admin signs in and allows on its pages), then, through package client,
// reads the factor configs, uploads a CSV, waits for the job and pages
// through its results.
func TestSDK_TokenUploadWaitAndPage(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	dev := e2eStartDev(t, "dev", dataDir)
	base := "http://" + dev.api
	store := e2eOpenDB(t, "sqlite:"+filepath.Join(dataDir, "iam.db"))
	org := e2eFirstOrg(t, store.Store)
	const n = 12
	for i := 1; i <= n; i++ {
		u := &identity.User{OrgID: org.ID, FirstName: fmt.Sprint("User", i), Email: fmt.Sprintf("user%d@example.com", i), Status: identity.UserActive}
		if err := store.Users.Create(context.Background(), u, ""); err != nil {
			t.Fatal(err)
		}
	}

	// The application's redirect endpoint.
	codes := make(chan url.Values, 1)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case codes <- r.URL.Query():
		default:
		}
		if _, err := fmt.Fprint(w, "signed in"); err != nil {
			t.Errorf("callback: %v", err)
		}
	}))
	defer cb.Close()
	code, out, errOut := e2eRun(t, "clients", nil, "clients", "create", "--data-dir", dataDir, "--name", "SDK example",
		"--type", "server", "--homepage", cb.URL, "--redirect-uri", cb.URL+"/callback")
	if code != 0 {
		t.Fatalf("iam clients create exited %d: %s", code, errOut)
	}
	var registered struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	if err := json.Unmarshal([]byte(out), &registered); err != nil || registered.Secret == "" {
		t.Fatalf("iam clients create printed %s (%v)", out, err)
	}

	conf := &oauth2.Config{
		ClientID: registered.ID, ClientSecret: registered.Secret, RedirectURL: cb.URL + "/callback",
		Scopes:   []string{"svc.quick_enrollment.ALL,svc.job.READ"},
		Endpoint: oauth2.Endpoint{AuthURL: base + "/oauth/v2/auth", TokenURL: base + "/oauth/v2/token", AuthStyle: oauth2.AuthStyleInHeader},
	}
	verifier := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("sdk-state", oauth2.AccessTypeOffline, oauth2.S256ChallengeOption(verifier))
	signInAndAllow(t, base, authURL, e2eAdminEmail, e2eAdminPassword)
	var q url.Values
	select {
	case q = <-codes:
	case <-time.After(10 * time.Second):
		t.Fatal("the browser never reached the redirect URI")
	}
	ctx := context.Background()
	tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil || q.Get("state") != "sdk-state" {
		t.Fatalf("exchange: %v (redirect %v)", err, q)
	}

	// The SDK, with the token source (it refreshes the token when it expires).
	api, err := client.NewClientWithResponses(base, client.WithTokenSource(conf.TokenSource(ctx, tok)))
	if err != nil {
		t.Fatal(err)
	}
	configs, err := api.ListAuthnFactorConfigsWithResponse(ctx)
	if err != nil || configs.JSON200 == nil {
		t.Fatalf("factor configs: %v %s", err, configs.Body)
	}
	var emailOTP string
	for _, c := range configs.JSON200.Data {
		if c.FactorType == client.FactorConfigFactorTypeEMAILOTP {
			emailOTP = c.Id
		}
	}
	var csv strings.Builder
	csv.WriteString("Primary Email,Email Address\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&csv, "user%d@example.com,otp%d@example.com\n", i, i)
	}
	csv.WriteString("nobody@example.com,otp@example.com\n") // no such user: an error row
	body, contentType := multipartCSV(t, map[string]string{"factor_configs": emailOTP}, "users.csv", csv.String())
	key := client.IdempotencyKey("sdk-upload-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	params := &client.UploadEnrollmentCSVParams{IdempotencyKey: &key}
	accepted, err := api.UploadEnrollmentCSVWithBodyWithResponse(ctx, params, contentType, body)
	if err != nil || accepted.JSON202 == nil {
		t.Fatalf("upload: %v %d %s", err, accepted.StatusCode(), accepted.Body)
	}
	// The SDK sends the key: the same upload again is the first answer.
	body, contentType = multipartCSV(t, map[string]string{"factor_configs": emailOTP}, "users.csv", csv.String())
	again, err := api.UploadEnrollmentCSVWithBodyWithResponse(ctx, params, contentType, body)
	if err != nil || again.JSON202 == nil || again.JSON202.Data.Id != accepted.JSON202.Data.Id ||
		again.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the upload again with its key: %v %d %s; want the first answer (job %s)", err, again.StatusCode(), again.Body, accepted.JSON202.Data.Id)
	}
	jobID := accepted.JSON202.Data.Id

	var job *client.Job
	e2eWaitFor(t, 60*time.Second, 200*time.Millisecond, "the job finishes", func() (bool, string) {
		r, err := api.GetJobWithResponse(ctx, jobID)
		if err != nil || r.JSON200 == nil {
			return false, fmt.Sprint(err, r.Status())
		}
		job = r.JSON200
		switch job.Status {
		case client.JobStatusCOMPLETED, client.JobStatusWARNING, client.JobStatusERROR:
			return true, ""
		}
		return false, string(job.Status)
	}, dev.e2eProc)
	if job.Status != client.JobStatusWARNING || job.Details.SuccessCount != n || job.Details.ErrorCount != 1 {
		t.Fatalf("job %s: %d ok, %d failed; want WARNING, %d ok and 1 failed", job.Status, job.Details.SuccessCount, job.Details.ErrorCount, n)
	}

	// Page through every result, 5 at a time.
	var rows []client.JobResult
	limit := client.Limit200(5)
	for from := 0; ; from += int(limit) {
		f := client.From(from)
		page, err := api.ListJobResultsWithResponse(ctx, jobID, &client.ListJobResultsParams{Limit: &limit, From: &f})
		if err != nil || page.JSON200 == nil {
			t.Fatalf("results from %d: %v %s", from, err, page.Body)
		}
		rows = append(rows, page.JSON200.Data...)
		if from+int(limit) >= page.JSON200.Meta.TotalNoOfObjects {
			break
		}
	}
	if len(rows) != n+1 || *rows[n].Status != client.JobResultStatusERROR || *rows[0].Status != client.JobResultStatusSUCCESS {
		t.Errorf("%d results (last %+v), want %d successes then one error", len(rows), rows[len(rows)-1], n)
	}
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// signInAndAllow is the admin in a browser: the sign-in page, then the
// consent page, each form posted with its CSRF cookie. It ends at the
// redirect to the application.
func signInAndAllow(t *testing.T, base, authURL, email, password string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	page := func(resp *http.Response, err error) url.Values {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer closeT(t, resp.Body)
		b, _ := io.ReadAll(resp.Body)
		form := url.Values{}
		for _, m := range hiddenInput.FindAllStringSubmatch(string(b), -1) {
			form.Set(m[1], html.UnescapeString(m[2]))
		}
		if resp.StatusCode != http.StatusOK || form.Get("csrf_token") == "" {
			t.Fatalf("%s: %d, no form:\n%s", resp.Request.URL, resp.StatusCode, b)
		}
		return form
	}
	form := page(browser.Get(authURL)) //nolint:bodyclose // page reads and closes the body
	form.Set("email", email)
	form.Set("password", password)
	// Redirected to the consent page.
	form = page(browser.PostForm(base+"/oauth/v2/login", form)) //nolint:bodyclose // page reads and closes the body
	form.Set("decision", "allow")
	resp, err := browser.PostForm(base+"/oauth/v2/consent", form) // redirected to the application
	if err != nil {
		t.Fatal(err)
	}
	if err = resp.Body.Close(); err != nil {
		t.Error(err)
	}
}

// multipartCSV is an upload form: fields, then the file.
func multipartCSV(t *testing.T, fields map[string]string, name, csv string) (io.Reader, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for k, v := range fields {
		if err := w.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := w.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write([]byte(csv)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return &b, w.FormDataContentType()
}
