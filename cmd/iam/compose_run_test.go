package main

import (
	"bytes"
	"context"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/jobs"
	"iam/models/notification"
	"iam/notify/smtptest"
)

// composeStandIns maps the compose network's addresses to what runs in the
// test. TestCompose_RunsAsComposeWould rewrites the resolved environment of
// every iam service with it and nothing else:
//
//   - IAM_DATABASE_URL postgres://…@postgres:5432/… is replaced whole by the
//     throwaway PostgreSQL's URL (it has its own user, password and database);
//   - the host:port temporal:7233 becomes the in-process Temporal frontend
//     (e2eTemporal, a server of its own), and the namespace compose names its
//     namespace when they differ;
//   - IAM_SMTP_HOST mailcatcher and IAM_SMTP_PORT 1025 become the test's SMTP
//     server (notify/smtptest, plain SMTP like the mail catcher);
//   - listen addresses (:8080, :9090, :8081) become 127.0.0.1:0, a free port each:
//     tests run side by side and cannot hold fixed ports.
//
// Any other value naming a compose service fails the test: it would reach
// nothing outside compose.
type composeStandIns struct {
	databaseURL, temporal, namespace string
	smtp                             *smtptest.Server
}

// environ returns the service's environment as compose resolves it, with the
// compose addresses mapped to the stand-ins.
func (s composeStandIns) environ(t *testing.T, project *types.Project, service string) []string {
	t.Helper()
	svc := project.Services[service]
	known, err := configVariables()
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for key, value := range svc.Environment {
		if value == nil {
			t.Fatalf("%s passes %s without a value", service, key)
		}
		if !slices.Contains(known, key) {
			t.Fatalf("%s passes %s, which the binary does not read", service, key)
		}
		v := *value
		switch key {
		case "IAM_DATABASE_URL":
			u, err := url.Parse(v)
			if err != nil || u.Host != "postgres:5432" {
				t.Fatalf("%s: IAM_DATABASE_URL %q does not point at the compose postgres service", service, v)
			}
			v = s.databaseURL
		case "IAM_TEMPORAL_ADDRESS":
			if v != "temporal:7233" {
				t.Fatalf("%s: IAM_TEMPORAL_ADDRESS %q is not the compose temporal service", service, v)
			}
			v = s.temporal
		case "IAM_TEMPORAL_NAMESPACE":
			v = s.namespace
		case "IAM_SMTP_HOST":
			if v != "mailcatcher" {
				t.Fatalf("%s: IAM_SMTP_HOST %q is not the compose mail catcher", service, v)
			}
			v = s.smtp.Host
		case "IAM_SMTP_PORT":
			if v != "1025" {
				t.Fatalf("%s: IAM_SMTP_PORT %q is not the mail catcher's SMTP port", service, v)
			}
			v = strconv.Itoa(s.smtp.Port)
		case "IAM_HTTP_ADDR", "IAM_METRICS_ADDR", "IAM_HEALTH_ADDR":
			if host, _, err := net.SplitHostPort(v); err != nil || host != "" {
				t.Fatalf("%s: %s %q is not a listen address of every interface", service, key, v)
			}
			v = "127.0.0.1:0"
		}
		if _, ok := project.Services[composeHost(v)]; ok {
			t.Fatalf("%s: %s=%q names the compose service %s, which the test maps to nothing", service, key, v, composeHost(v))
		}
		env = append(env, key+"="+v)
	}
	slices.Sort(env)
	return env
}

// composeHost is the host a value names: a URL's, a host:port's, or the
// value itself.
func composeHost(v string) string {
	if u, err := url.Parse(v); err == nil && u.Host != "" {
		return u.Hostname()
	}
	if host, _, err := net.SplitHostPort(v); err == nil {
		return host
	}
	return v
}

// TestCompose_RunsAsComposeWould starts every iam service of
// docker-compose.yml as a process of the built binary, with exactly the
// environment compose gives it (and the test's .env), compose's addresses
// mapped to local stand-ins (composeStandIns). `migrate up` runs once and
// ends; serve answers /readyz and /metrics on its own listener; the workers
// (as many as compose's replicas) poll and answer their probes. Then, over
// HTTP with a token from `iam token`, a CSV enrollment with a TOTP column
// completes (the encryption key reaches the workers) and a notification run
// delivers its mail to the SMTP server standing in for the mail catcher;
// both workers take part. A variable compose passes that the binary does not
// read fails the test, and one the binary needs that compose lacks makes a
// process fail.
func TestCompose_RunsAsComposeWould(t *testing.T) {
	t.Parallel()
	project, err := loadCompose(t, composeTestDotenv())
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	dsn := dbtest.PostgresURL(t)
	e2eEmptySchema(t, dsn)
	// A Temporal server of its own (e2eTemporal); the workers register iam's
	// search attributes there, as in compose.
	temporalAddr, namespace := e2eTemporal(t)
	mail, err := smtptest.Start(smtptest.Options{TLS: smtptest.TLSNone})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeT(t, mail) })
	stand := composeStandIns{databaseURL: dsn, temporal: temporalAddr, namespace: namespace, smtp: mail}

	// Every service that runs the iam image is one of the three we start.
	iamImage := project.Services["iam-migrate"].Image
	for name, svc := range project.Services {
		if _, ok := composeServices[name]; svc.Image == iamImage && !ok {
			t.Errorf("compose runs %s on the iam image; this test does not know it", name)
		}
	}

	// iam-migrate: once, to its end.
	migrate := project.Services["iam-migrate"]
	code, out, errOut := e2eRun(t, "iam-migrate", stand.environ(t, project, "iam-migrate"), migrate.Command...)
	if code != 0 {
		t.Fatalf("iam-migrate exited %d: %s", code, errOut)
	}
	for _, name := range e2eMigrationNames(t) {
		if !strings.Contains(out, "applied "+name+"\n") {
			t.Errorf("iam-migrate does not say it applied %s:\n%s", name, out)
		}
	}

	// iam-serve and the iam-worker replicas.
	serveEnv := stand.environ(t, project, "iam-serve")
	serve := e2eStart(t, "iam-serve", serveEnv, project.Services["iam-serve"].Command...)
	all := []*e2eProc{serve}
	var workers []*e2eProc
	replicas := 1
	if d := project.Services["iam-worker"].Deploy; d != nil && d.Replicas != nil {
		replicas = *d.Replicas
	}
	workerEnv := stand.environ(t, project, "iam-worker")
	for i := range replicas {
		w := e2eStart(t, fmt.Sprintf("iam-worker-%d", i+1), workerEnv, project.Services["iam-worker"].Command...)
		workers = append(workers, w)
		all = append(all, w)
	}
	var apiAddr string
	e2eWaitFor(t, 30*time.Second, 20*time.Millisecond, "iam-serve logs where it listens", func() (bool, string) {
		rec := serve.logLine("API listening")
		apiAddr, _ = rec["address"].(string)
		return apiAddr != "", "no \"API listening\" record yet"
	}, all...)
	e2eWaitReady(t, serve, apiAddr, 30*time.Second)
	// /metrics on its own listener (IAM_METRICS_ADDR), not beside the API.
	metricsAddr, _ := serve.logLine("metrics listening")["address"].(string)
	if status, body := e2eHTTPGet("http://" + metricsAddr + "/metrics"); status != http.StatusOK || !bytes.Contains(body, []byte("go_goroutines")) {
		t.Errorf("iam-serve /metrics on %q answered %d %.200s", metricsAddr, status, body)
	}
	if status, _ := e2eHTTPGet("http://" + apiAddr + "/metrics"); status == http.StatusOK {
		t.Error("iam-serve serves /metrics on the API's listener too")
	}
	for _, w := range workers {
		e2eWaitFor(t, 30*time.Second, 20*time.Millisecond, w.name+" polls", func() (bool, string) {
			return w.logLine("worker polling") != nil, "no \"worker polling\" record yet"
		}, all...)
		// Its probes (IAM_HEALTH_ADDR) answer.
		var healthAddr string
		e2eWaitFor(t, 10*time.Second, 20*time.Millisecond, w.name+" logs where its probes listen", func() (bool, string) {
			healthAddr, _ = w.logLine("worker health listening")["address"].(string)
			return healthAddr != "", "no \"worker health listening\" record yet"
		}, all...)
		e2eWaitReady(t, w, healthAddr, 10*time.Second)
		if status, body := e2eHTTPGet("http://" + healthAddr + "/healthz"); status != http.StatusOK {
			t.Errorf("%s /healthz answered %d %s", w.name, status, body)
		}
	}

	store := e2eOpenDB(t, dsn)
	org := e2eFirstOrg(t, store.Store)
	users := e2eSeedFlowUsers(t, store, org, e2eFlowCSVRows+e2eFlowRecipients)
	// `docker compose exec iam-serve iam token …`: the token command with
	// serve's environment.
	admin := *project.Services["iam-serve"].Environment["IAM_BOOTSTRAP_ADMIN_EMAIL"]
	token := e2eIssueToken(t, serveEnv, e2eFlowScopes, "--user", admin)

	// A CSV enrollment with a TOTP column.
	const rows, chunk = 2000, 100
	jobID := composeStartTOTPEnrollment(t, apiAddr, token, rows, chunk)
	job := e2eWaitJob(t, store.Store, org, jobID, 45*time.Second, e2eFinished, all...)
	if job.Status != jobs.JobCompleted || job.Processed != rows || job.SuccessCount != rows {
		t.Errorf("the TOTP enrollment ended %s (%q), %d/%d processed, %d ok; want COMPLETED, all %d", job.Status, job.Message, job.Processed, job.Total, job.SuccessCount, rows)
	}
	n, err := store.DB.NewSelect().Table("enrollments").Where("org_id = ? AND job_id = ? AND factor_type = ?", org.ID, job.ID, enrollment.FactorTOTP).Count(context.Background())
	if err != nil || n != rows {
		t.Errorf("%d TOTP enrollments (%v), want %d", n, err, rows)
	}

	// A notification run: its mail reaches the stand-in of the mail catcher.
	scheduleID := e2eStartNotificationRun(t, apiAddr, token, users)
	var run *notification.NotificationRun
	e2eWaitFor(t, 45*time.Second, 20*time.Millisecond, "the run finishes", func() (bool, string) {
		run = e2eNotificationRun(t, store, scheduleID)
		if run == nil {
			return false, "no run yet"
		}
		return run.Status != notification.RunRunning, run.Status
	}, all...)
	received := map[string]int{}
	for _, m := range mail.Messages() {
		for _, to := range m.To {
			received[to]++
		}
		if !bytes.Contains(m.Data, []byte("Enrol, User")) {
			t.Errorf("a mail to %v does not carry the template's subject", m.To)
		}
	}
	e2eCheckNotificationRun(t, store.Store, run, received, 0)
	if run.Sent != e2eFlowRecipients || len(received) != e2eFlowRecipients {
		t.Errorf("%d sent, %d recipients reached, want %d", run.Sent, len(received), e2eFlowRecipients)
	}

	// Both workers took work: each ran tasks of the workflows run here.
	tc, err := client.Dial(client.Options{HostPort: temporalAddr, Namespace: namespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	ran := map[int]int{}
	for _, id := range composeWorkflowIDs(t, tc) {
		for pid, n := range composeTaskRunners(t, tc, id) {
			ran[pid] += n
		}
	}
	for _, w := range workers {
		if ran[w.cmd.Process.Pid] == 0 {
			t.Errorf("%s (pid %d) ran no task; tasks by pid: %v", w.name, w.cmd.Process.Pid, ran)
		}
	}
	t.Logf("tasks by worker pid: %v; %d mails delivered", ran, len(mail.Messages()))
}

// composeWorkflowIDs lists the workflows of the namespace.
func composeWorkflowIDs(t *testing.T, tc client.Client) []string {
	t.Helper()
	var ids []string
	var next []byte
	for {
		resp, err := tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{PageSize: 100, NextPageToken: next})
		if err != nil {
			t.Fatalf("list workflows: %v", err)
		}
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		if next = resp.GetNextPageToken(); len(next) == 0 {
			return ids
		}
	}
}

// composeStartTOTPEnrollment uploads a CSV of users 1..rows with a TOTP
// secret each, for the TOTP factor config, and returns the job's id.
func composeStartTOTPEnrollment(t *testing.T, addr, token string, rows, chunk int) int64 {
	t.Helper()
	var configs struct {
		Data []struct {
			ID   string `json:"id"`
			Type string `json:"factor_type"`
		} `json:"data"`
	}
	e2eAPIJSON(t, addr, "GET", "/api/v1/protection/authnfactor-configs", token, nil, http.StatusOK, &configs)
	i := slices.IndexFunc(configs.Data, func(c struct {
		ID   string `json:"id"`
		Type string `json:"factor_type"`
	}) bool {
		return c.Type == string(enrollment.FactorTOTP)
	})
	if i < 0 {
		t.Fatalf("no TOTP factor config among %+v", configs.Data)
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for _, f := range [][2]string{{"factor_configs", configs.Data[i].ID}, {"file_encoding", "UTF-8"}, {"chunk_rows", strconv.Itoa(chunk)}} {
		if err := w.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := w.CreateFormFile("file", "totp.csv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err = fw.Write(composeTOTPCSV(rows)); err != nil {
		t.Fatal(err)
	}
	if err = w.Close(); err != nil {
		t.Fatal(err)
	}
	status, data := e2eAPIDo(t, addr, "POST", "/api/v1/protection/quick-enrollment/upload-csv", token, w.FormDataContentType(), body.Bytes())
	if status != http.StatusAccepted {
		t.Fatalf("upload-csv answered %d: %.500s", status, data)
	}
	var accepted struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err = json.Unmarshal(data, &accepted); err != nil {
		t.Fatalf("upload-csv: %v: %.500s", err, data)
	}
	id, err := models.ParseID("id", accepted.Data.ID)
	if err != nil {
		t.Fatalf("upload-csv: job id %q: %v", accepted.Data.ID, err)
	}
	return id
}

// composeTOTPCSV is users 1..rows with a distinct base32 TOTP secret each.
func composeTOTPCSV(rows int) []byte {
	var b bytes.Buffer
	b.WriteString("Primary Email,TOTP Secret\n")
	for r := 1; r <= rows; r++ {
		fmt.Fprintf(&b, "user%d@example.com,%s\n", r, base32.StdEncoding.EncodeToString([]byte(fmt.Sprintf("totp-secret-%08d", r))))
	}
	return b.Bytes()
}

// composeTaskRunners counts, by worker pid, the workflow and activity tasks
// of a workflow's history that each worker started.
func composeTaskRunners(t *testing.T, tc client.Client, workflowID string) map[int]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := tc.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ran := map[int]int{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		identity := ""
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			identity = a.GetIdentity()
		} else if w := e.GetWorkflowTaskStartedEventAttributes(); w != nil {
			identity = w.GetIdentity()
		} else {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(identity, "@", 2)[0])
		if err != nil {
			t.Fatalf("worker identity %q does not start with a pid", identity)
		}
		ran[pid]++
	}
	return ran
}
