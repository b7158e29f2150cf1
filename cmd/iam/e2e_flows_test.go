package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/api/auth"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/notification"
	"iam/models/sqldb"
	"iam/models/store"
)

// The flows below drive the three kinds of bulk work through the built
// binary over HTTP, as an admin with a token from `iam token` would: a CSV
// enrollment, a dynamic group's recompute and a notification run. The
// tests kill the process doing the work in the middle of each and check
// that the work ends as an undisturbed run would have left it.

// e2eFlowScopes are the scopes of the flows' token.
const e2eFlowScopes = "svc.job.READ,svc.quick_enrollment.ALL,svc.group.ALL,svc.notification_template.ALL"

// The flows' sizes: users of the organization (half of them in Sales), CSV
// rows (every 97th with a bad mobile number) and its chunk, recipients of
// the notification run.
const (
	e2eFlowUsers      = 50_000
	e2eFlowCSVRows    = 12_000
	e2eFlowChunkRows  = 1_000
	e2eFlowRecipients = 600
)

// e2eCrashAfterChunkCommit is the test-only variable that makes a process
// SIGKILL itself right after its n-th committed enrollment chunk (see
// activities/testhook_crash.go).
const e2eCrashAfterChunkCommit = "IAM_TEST_CRASH_AFTER_CHUNK_COMMIT"

// e2eFlowUser is the slice of the users table the flows fill.
type e2eFlowUser struct {
	bun.BaseModel `bun:"table:users"`

	ID           int64     `bun:"id,pk"`
	OrgID        int64     `bun:"org_id"`
	FirstName    string    `bun:"first_name"`
	Email        string    `bun:"email"`
	MobileNumber string    `bun:"mobile_number"`
	Department   string    `bun:"department"`
	CreatedAt    time.Time `bun:"created_at"`
	UpdatedAt    time.Time `bun:"updated_at"`
}

// e2eSeedFlowUsers writes the organization's users straight into the
// database: user<i>@example.com for i from 1, department Sales for even i.
// It returns their ids by i.
func e2eSeedFlowUsers(t *testing.T, store *e2eDB, org *identity.Organization, n int) map[int]int64 {
	t.Helper()
	ctx := context.Background()
	ids := make(map[int]int64, n)
	now := time.Now().UTC()
	for start := 1; start <= n; start += 2000 {
		var batch []e2eFlowUser
		for i := start; i < start+2000 && i <= n; i++ {
			dept := "IT"
			if i%2 == 0 {
				dept = "Sales"
			}
			u := e2eFlowUser{ID: sqldb.NewID(), OrgID: org.ID, FirstName: fmt.Sprintf("User%d", i), Email: fmt.Sprintf("user%d@example.com", i),
				MobileNumber: fmt.Sprintf("+1555%07d", i), Department: dept, CreatedAt: now, UpdatedAt: now}
			ids[i] = u.ID
			batch = append(batch, u)
		}
		if _, err := store.DB.NewInsert().Model(&batch).Exec(ctx); err != nil {
			t.Fatalf("seed users: %v", err)
		}
	}
	return ids
}

// e2eAPIDo sends a request to the API at addr with token, checks the answer
// against the OpenAPI document, and returns its status and body.
func e2eAPIDo(t *testing.T, addr, method, path, token, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", auth.Scheme+" "+token)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer closeT(t, resp.Body)
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	apitest.CheckResponse(t, req, resp, data)
	return resp.StatusCode, data
}

// e2eAPIJSON sends v as JSON and decodes the answer's data into out; the
// answer must have status want.
func e2eAPIJSON(t *testing.T, addr, method, path, token string, v any, want int, out any) {
	t.Helper()
	var body []byte
	ct := ""
	if v != nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
		ct = "application/json"
	}
	status, data := e2eAPIDo(t, addr, method, path, token, ct, body)
	if status != want {
		t.Fatalf("%s %s answered %d, want %d: %.500s", method, path, status, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %.500s", method, path, err, data)
		}
	}
}

// e2eFlowCSV is the enrollment file: Primary Email, Email Address and
// Mobile Number of users 1..rows; every 97th number is not one.
func e2eFlowCSV(rows int) []byte {
	var b bytes.Buffer
	b.WriteString("Primary Email,Email Address,Mobile Number\n")
	for i := 1; i <= rows; i++ {
		mobile := fmt.Sprintf("+1415%07d", i)
		if i%97 == 0 {
			mobile = "not a number"
		}
		fmt.Fprintf(&b, "user%d@example.com,otp%d@example.com,%s\n", i, i, mobile)
	}
	return b.Bytes()
}

// e2eStartEnrollment uploads the flow's CSV for the Email OTP and SMS OTP
// factor configs and returns the job's id.
func e2eStartEnrollment(t *testing.T, addr, token string) int64 {
	t.Helper()
	return e2eStartEnrollmentOf(t, addr, token, e2eFlowCSVRows, e2eFlowChunkRows)
}

// e2eStartEnrollmentOf is e2eStartEnrollment of rows rows in chunks of chunk.
func e2eStartEnrollmentOf(t *testing.T, addr, token string, rows, chunk int) int64 {
	t.Helper()
	body, ct := e2eEnrollmentFormOf(t, addr, token, rows, chunk)
	status, data := e2eAPIDo(t, addr, "POST", "/api/v1/protection/quick-enrollment/upload-csv", token, ct, body)
	if status != http.StatusAccepted {
		t.Fatalf("upload-csv answered %d: %.500s", status, data)
	}
	var accepted struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &accepted); err != nil {
		t.Fatalf("upload-csv: %v: %.500s", err, data)
	}
	id, err := models.ParseID("id", accepted.Data.ID)
	if err != nil {
		t.Fatalf("upload-csv: job id %q: %v (%.500s)", accepted.Data.ID, err, data)
	}
	return id
}

// e2eCheckEnrollment checks the finished enrollment job: WARNING, every row
// processed exactly once with the result its data calls for, and exactly one
// enrollment per factor of every good row, written by its own row.
func e2eCheckEnrollment(t *testing.T, store *e2eDB, org *identity.Organization, job *jobs.Job, users map[int]int64) {
	t.Helper()
	e2eCheckEnrollmentOf(t, store, org, job, users, e2eFlowCSVRows)
}

// e2eCheckEnrollmentOf is e2eCheckEnrollment for a file of rows rows.
func e2eCheckEnrollmentOf(t *testing.T, store *e2eDB, org *identity.Organization, job *jobs.Job, users map[int]int64, fileRows int) {
	t.Helper()
	ctx := context.Background()
	rows := int64(fileRows)
	bad := rows / 97
	if job.Status != jobs.JobWarning || job.Processed != rows || job.Total != rows || job.SuccessCount != rows-bad || job.ErrorCount != bad {
		t.Errorf("enrollment job %d: %s %d/%d, %d ok, %d failed; want WARNING %d/%d, %d ok, %d failed",
			job.ID, job.Status, job.Processed, job.Total, job.SuccessCount, job.ErrorCount, rows, rows, rows-bad, bad)
	}
	results, err := store.Jobs.Results(ctx, job.ID, "", 0, int(rows)+100)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(results)) != rows {
		t.Errorf("enrollment job %d has %d results, want one per row: %d", job.ID, len(results), rows)
	}
	for i, r := range results {
		row := i + 1
		want := jobs.ResultSuccess
		if row%97 == 0 {
			want = jobs.ResultError
		}
		if r.Seq != int64(row) || r.Status != want || r.EntityID != models.FormatID(users[row]) {
			t.Fatalf("result %d: %+v, want row %d %s of user %d", i, r, row, want, users[row])
		}
	}
	n, err := store.DB.NewSelect().Table("enrollments").Where("org_id = ? AND job_id = ?", org.ID, job.ID).Count(ctx)
	if err != nil || int64(n) != 2*(rows-bad) {
		t.Errorf("%d enrollments (%v), want %d", n, err, 2*(rows-bad))
	}
	wrong, err := store.DB.NewSelect().Table("enrollments").
		Where("org_id = ? AND factor_type = 'EMAIL_OTP' AND value <> 'otp' || CAST(source_row AS TEXT) || '@example.com'", org.ID).Count(ctx)
	if err != nil || wrong != 0 {
		t.Errorf("%d enrollments hold another row's data (%v)", wrong, err)
	}
}

// e2eStartRecompute creates a dynamic group of the Sales department over
// HTTP and returns it and its recompute job's id.
func e2eStartRecompute(t *testing.T, addr, token string) (groupID, jobID int64) {
	t.Helper()
	var created struct {
		Data struct {
			ID    string  `json:"id"`
			JobID *string `json:"membership_job_id"`
		} `json:"data"`
	}
	e2eAPIJSON(t, addr, "POST", "/api/v1/groups", token,
		map[string]any{"name": "Sales", "is_dynamic": true, "membership_rule": `department eq "Sales"`}, http.StatusCreated, &created)
	if created.Data.JobID == nil {
		t.Fatalf("the dynamic group %s has no membership job", created.Data.ID)
	}
	g, err := models.ParseID("id", created.Data.ID)
	if err != nil {
		t.Fatal(err)
	}
	j, err := models.ParseID("id", *created.Data.JobID)
	if err != nil {
		t.Fatal(err)
	}
	return g, j
}

// e2eMembersCount reads a group's member count from the database.
func e2eMembersCount(t *testing.T, store *store.Store, org *identity.Organization, groupID int64) int64 {
	t.Helper()
	g, err := store.Groups.Get(context.Background(), org.ID, groupID)
	if err != nil {
		t.Fatal(err)
	}
	return g.MembersCount
}

// e2eCheckRecompute checks the finished recompute: COMPLETED over every
// user, and the group's members exactly the users of Sales.
func e2eCheckRecompute(t *testing.T, store *store.Store, org *identity.Organization, job *jobs.Job, groupID int64, users map[int]int64) {
	t.Helper()
	total, err := store.Users.CountUsers(context.Background(), org.ID) // the admin too
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != jobs.JobCompleted || job.Processed != total || job.Total != total {
		t.Errorf("recompute job %d: %s %d/%d (%q), want COMPLETED over %d users", job.ID, job.Status, job.Processed, job.Total, job.Message, total)
	}
	got, err := store.Groups.MemberIDs(context.Background(), groupID, len(users)+10)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for i, id := range users {
		if i%2 == 0 {
			want = append(want, id)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the group has %d members, want the %d users of Sales", len(got), len(want))
	}
	if n := e2eMembersCount(t, store, org, groupID); n != int64(len(want)) {
		t.Errorf("members_count %d, want %d", n, len(want))
	}
}

// e2eStartNotificationRun makes, over HTTP, a static group of the
// recipients (users who are not enrolled), a mail template and a paused
// schedule, and starts a run now. It returns the schedule's id.
func e2eStartNotificationRun(t *testing.T, addr, token string, users map[int]int64) int64 {
	t.Helper()
	first := e2eFlowCSVRows + 1 // after the enrolled users
	var members []string
	for i := first; i < first+e2eFlowRecipients; i++ {
		members = append(members, models.FormatID(users[i]))
	}
	var group struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	e2eAPIJSON(t, addr, "POST", "/api/v1/groups", token, map[string]any{"name": "Not enrolled"}, http.StatusCreated, &group)
	groupID, err := models.ParseID("id", group.Data.ID)
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < len(members); start += 1000 {
		e2eAPIJSON(t, addr, "POST", "/api/v1/groups/"+group.Data.ID+"/members", token,
			map[string]any{"members": members[start:min(len(members), start+1000)]}, http.StatusOK, nil)
	}
	var tpl struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	e2eAPIJSON(t, addr, "POST", "/api/v1/templates/notification", token, map[string]any{
		"name": "Enrol reminder", "description": "to users who have not enrolled", "module": "Reports",
		"mail": map[string]any{"to": []string{"SELF"}, "cc": []string{}, "subject": "Enrol, %first_name%",
			"content": "<p>Hello %display_name%, please enrol.</p>", "severity": "high"},
	}, http.StatusCreated, &tpl)
	var sc struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	e2eAPIJSON(t, addr, "POST", "/api/v1/protection/quick-enrollment/notification-auto-schedule", token, map[string]any{
		"name": "Reminder", "description": "remind who has not enrolled", "groups": []int64{groupID},
		"notification_template_id": tpl.Data.ID,
		"schedule_settings":        map[string]any{"scheduler_interval": "MONTHLY", "day_of_month": "1", "hours": "3", "minutes": "0"},
	}, http.StatusCreated, &sc)
	e2eAPIJSON(t, addr, "POST", "/api/v1/protection/quick-enrollment/notification-auto-schedule/"+sc.Data.ID+"/pause", token, nil, http.StatusOK, nil)
	e2eAPIJSON(t, addr, "POST", "/api/v1/protection/quick-enrollment/notification-auto-schedule/"+sc.Data.ID+"/run-now", token, nil, http.StatusAccepted, nil)
	id, err := models.ParseID("id", sc.Data.ID)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// e2eNotificationRun returns the schedule's one run, nil before it is prepared.
func e2eNotificationRun(t *testing.T, store *e2eDB, scheduleID int64) *notification.NotificationRun {
	t.Helper()
	var runs []notification.NotificationRun
	if err := store.DB.NewSelect().Model(&runs).Where("notification_id = ?", scheduleID).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(runs) > 1 {
		t.Fatalf("schedule %d has %d runs, want one", scheduleID, len(runs))
	}
	if len(runs) == 0 {
		return nil
	}
	return &runs[0]
}

// e2eOutboxMail counts the mails in an outbox log by recipient.
func e2eOutboxMail(t *testing.T, outbox string) map[string]int {
	t.Helper()
	got := map[string]int{}
	f, err := os.Open(filepath.Join(outbox, "outbox.log")) //nolint:gosec // the outbox folder the test gave the binary
	if os.IsNotExist(err) {
		return got
	}
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, f)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) >= 3 && fields[1] == "mail" {
			got[strings.TrimPrefix(fields[2], "to=")]++
		}
	}
	return got
}

// e2eCheckNotificationRun checks a finished run whose senders were killed
// in killed processes: every recipient has one delivery, sent or (held by a
// killed sender) uncertain, at most the senders' claims of the killed
// processes uncertain, and nobody got two messages; every delivery recorded
// sent is in the outbox once.
func e2eCheckNotificationRun(t *testing.T, store *store.Store, run *notification.NotificationRun, mail map[string]int, killed int64) {
	t.Helper()
	maxUncertain := killed * 4 * 4 // IAM_NOTIFY_CONCURRENCY × IAM_NOTIFY_CLAIM_BATCH each
	if run.Status != notification.RunCompleted || run.Total != e2eFlowRecipients || run.Sent+run.Uncertain != e2eFlowRecipients ||
		run.Failed != 0 || run.Uncertain > maxUncertain {
		t.Errorf("run %d: %s (%q), %d of %d sent, %d failed, %d uncertain; want COMPLETED, all sent but at most %d uncertain",
			run.ID, run.Status, run.Message, run.Sent, run.Total, run.Failed, run.Uncertain, maxUncertain)
	}
	ds, err := store.Notifications.Deliveries(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != e2eFlowRecipients {
		t.Errorf("run %d has %d deliveries, want %d", run.ID, len(ds), e2eFlowRecipients)
	}
	for _, d := range ds {
		switch {
		case d.State == notification.DeliverySent && mail[d.Address] != 1:
			t.Errorf("%s is recorded sent and got %d messages", d.Address, mail[d.Address])
		case d.State == notification.DeliveryUncertain && mail[d.Address] > 1:
			t.Errorf("%s is uncertain and got %d messages", d.Address, mail[d.Address])
		case d.State != notification.DeliverySent && d.State != notification.DeliveryUncertain:
			t.Errorf("delivery to %s is %s", d.Address, d.State)
		}
	}
	for addr, n := range mail {
		if n > 1 {
			t.Errorf("%s got %d messages", addr, n)
		}
	}
}

// e2eCheckKilledBySelf waits for p to end and checks it was SIGKILLed (by
// the test-only crash hook).
func e2eCheckKilledBySelf(t *testing.T, p *e2eProc, timeout time.Duration) {
	t.Helper()
	if !p.waitExit(timeout) {
		t.Fatalf("%s with %s still runs after %v", p.name, e2eCrashAfterChunkCommit, timeout)
	}
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s ended %s, want killed by SIGKILL after a chunk's commit", p.name, p.state)
	}
}

// TestDev_BulkWorkSurvivesKill9 runs the three kinds of bulk work through
// `iam dev` over HTTP and kills the whole process in the middle of each:
// right after an enrollment chunk's commit (the test-only hook), while a
// recompute's batches run, and while a notification run sends. Each time
// dev starts again on its data folder, the work carries on and ends as an
// undisturbed run would have left it. The last dev process stops cleanly
// on Ctrl-C (SIGINT).
func TestDev_BulkWorkSurvivesKill9(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	outbox := filepath.Join(dataDir, "outbox")
	devEnv := func(extra ...string) []string { return append(e2eDevEnv(), extra...) }
	startDev := func(name string, extra ...string) *e2eDevProc {
		t.Helper()
		return e2eStartDevWith(t, name, dataDir, devEnv(extra...))
	}

	dev := startDev("dev-1", e2eCrashAfterChunkCommit+"=3")
	store := e2eOpenDB(t, "sqlite:"+filepath.Join(dataDir, "iam.db"))
	org := e2eFirstOrg(t, store.Store)
	began := time.Now()
	users := e2eSeedFlowUsers(t, store, org, e2eFlowUsers)
	t.Logf("seeded %d users in %v", e2eFlowUsers, time.Since(began).Round(time.Millisecond))
	token := e2eIssueToken(t, nil, e2eFlowScopes, "--data-dir", dataDir, "--user", e2eAdminEmail)

	// Enrollment: the process kills itself right after its third chunk's
	// commit, before the chunk's activity completes.
	enrollJob := e2eStartEnrollment(t, dev.api, token)
	e2eCheckKilledBySelf(t, dev.e2eProc, 60*time.Second)
	killed := e2eGetJob(t, store.Store, org, enrollJob)
	t.Logf("dev killed itself after a chunk's commit: enrollment %s at %d/%d", killed.Status, killed.Processed, killed.Total)
	if killed.Processed != 3*e2eFlowChunkRows {
		t.Errorf("the enrollment had %d rows processed at the kill, want the 3 chunks committed: %d", killed.Processed, 3*e2eFlowChunkRows)
	}
	dev = startDev("dev-2")
	job := e2eWaitJob(t, store.Store, org, enrollJob, 2*time.Minute, e2eFinished, dev.e2eProc)
	e2eCheckEnrollment(t, store, org, job, users)

	// Recompute: killed from outside once a batch has committed.
	groupID, recomputeJob := e2eStartRecompute(t, dev.api, token)
	e2eWaitFor(t, 2*time.Minute, 5*time.Millisecond, "a recompute batch commits", func() (bool, string) {
		n := e2eMembersCount(t, store.Store, org, groupID)
		return n > 0, fmt.Sprintf("%d members", n)
	}, dev.e2eProc)
	dev.kill()
	killed = e2eGetJob(t, store.Store, org, recomputeJob)
	t.Logf("killed dev during the recompute: %s, %d members of %d", killed.Status, e2eMembersCount(t, store.Store, org, groupID), e2eFlowUsers/2)
	if killed.Status.Finished() {
		t.Fatalf("the recompute finished before the kill: make it longer")
	}
	// The next dev sends slowly enough to be killed in the middle of the run.
	dev = startDev("dev-3", "IAM_NOTIFY_MESSAGES_PER_SECOND=100")
	job = e2eWaitJob(t, store.Store, org, recomputeJob, 2*time.Minute, e2eFinished, dev.e2eProc)
	e2eCheckRecompute(t, store.Store, org, job, groupID, users)

	// Notification run: killed from outside once some mail went out.
	scheduleID := e2eStartNotificationRun(t, dev.api, token, users)
	e2eWaitFor(t, 2*time.Minute, 5*time.Millisecond, "the run sends", func() (bool, string) {
		n := len(e2eOutboxMail(t, outbox))
		return n >= 50, fmt.Sprintf("%d mails", n)
	}, dev.e2eProc)
	dev.kill()
	run := e2eNotificationRun(t, store, scheduleID)
	t.Logf("killed dev during the run: %d mails in the outbox", len(e2eOutboxMail(t, outbox)))
	if run == nil || run.Status != notification.RunRunning {
		t.Fatalf("the run is %+v at the kill, want RUNNING", run)
	}
	dev = startDev("dev-4")
	e2eWaitFor(t, 2*time.Minute, 20*time.Millisecond, "the run finishes", func() (bool, string) {
		run = e2eNotificationRun(t, store, scheduleID)
		return run.Status != notification.RunRunning, run.Status
	}, dev.e2eProc)
	e2eCheckNotificationRun(t, store.Store, run, e2eOutboxMail(t, outbox), 1)
	t.Logf("run %d: %d sent, %d uncertain", run.ID, run.Sent, run.Uncertain)

	// Ctrl-C stops it cleanly.
	began = time.Now()
	dev.signal(syscall.SIGINT)
	if !dev.waitExit(30 * time.Second) {
		t.Fatalf("iam dev still runs 30s after SIGINT")
	}
	t.Logf("iam dev stopped %v after SIGINT", time.Since(began).Round(time.Millisecond))
	if code := dev.state.ExitCode(); code != 0 {
		t.Errorf("iam dev exited with %d after SIGINT, want 0", code)
	}
}

// TestProduction_BulkWorkSurvivesWorkerKill9 runs the three kinds of bulk
// work through the production shape over HTTP: `iam serve` and `iam
// worker` processes on PostgreSQL and a Temporal server. The worker doing
// the work is killed in the middle of each: right after an enrollment
// chunk's commit (the test-only hook), while a recompute's batches run and
// while a notification run sends. New workers finish the work as an
// undisturbed run would have left it.
func TestProduction_BulkWorkSurvivesWorkerKill9(t *testing.T) {
	t.Parallel()
	dsn := dbtest.PostgresURL(t)
	e2eEmptySchema(t, dsn)
	dbEnv := []string{"IAM_DATABASE_URL=" + dsn}
	if code, _, errOut := e2eRun(t, "migrate-up", dbEnv, "migrate", "up"); code != 0 {
		t.Fatalf("iam migrate up exited %d: %s", code, errOut)
	}
	outbox := filepath.Join(t.TempDir(), "outbox")
	temporalAddr, namespace := e2eTemporal(t)
	shape := e2eStartShape(t, dsn, temporalAddr, namespace,
		"IAM_NOTIFY_OUTBOX_DIR="+outbox,
		"IAM_NOTIFY_MESSAGES_PER_SECOND=100",
	)
	serve, apiAddr, startWorkers := shape.serve, shape.apiAddr, shape.startWorkers
	killAll := func(ws []*e2eProc) {
		for _, w := range ws {
			w.kill()
		}
	}

	store := e2eOpenDB(t, dsn)
	org := e2eFirstOrg(t, store.Store)
	users := e2eSeedFlowUsers(t, store, org, e2eFlowUsers)
	token := e2eIssueToken(t, []string{"IAM_DATABASE_URL=" + dsn, "IAM_SECRET_KEY=" + e2eSecretKey}, e2eFlowScopes, "--user", e2eAdminEmail)

	// Enrollment: the one worker kills itself right after its third chunk's
	// commit; two others take over.
	crashing := startWorkers(1, e2eCrashAfterChunkCommit+"=3")
	enrollJob := e2eStartEnrollment(t, apiAddr, token)
	e2eCheckKilledBySelf(t, crashing[0], 60*time.Second)
	killed := e2eGetJob(t, store.Store, org, enrollJob)
	t.Logf("the worker killed itself after a chunk's commit: enrollment %s at %d/%d", killed.Status, killed.Processed, killed.Total)
	workers := startWorkers(2)
	job := e2eWaitJob(t, store.Store, org, enrollJob, 2*time.Minute, e2eFinished, append([]*e2eProc{serve}, workers...)...)
	e2eCheckEnrollment(t, store, org, job, users)

	// Recompute: the workers are killed once a batch has committed.
	groupID, recomputeJob := e2eStartRecompute(t, apiAddr, token)
	e2eWaitFor(t, 2*time.Minute, 5*time.Millisecond, "a recompute batch commits", func() (bool, string) {
		n := e2eMembersCount(t, store.Store, org, groupID)
		return n > 0, fmt.Sprintf("%d members", n)
	}, append([]*e2eProc{serve}, workers...)...)
	killAll(workers)
	killed = e2eGetJob(t, store.Store, org, recomputeJob)
	t.Logf("killed the workers during the recompute: %s, %d members of %d", killed.Status, e2eMembersCount(t, store.Store, org, groupID), e2eFlowUsers/2)
	if killed.Status.Finished() {
		t.Fatalf("the recompute finished before the kill: make it longer")
	}
	workers = startWorkers(2)
	job = e2eWaitJob(t, store.Store, org, recomputeJob, 2*time.Minute, e2eFinished, append([]*e2eProc{serve}, workers...)...)
	e2eCheckRecompute(t, store.Store, org, job, groupID, users)

	// Notification run: the workers are killed once some mail went out.
	scheduleID := e2eStartNotificationRun(t, apiAddr, token, users)
	e2eWaitFor(t, 2*time.Minute, 5*time.Millisecond, "the run sends", func() (bool, string) {
		n := len(e2eOutboxMail(t, outbox))
		return n >= 50, fmt.Sprintf("%d mails", n)
	}, append([]*e2eProc{serve}, workers...)...)
	killAll(workers)
	run := e2eNotificationRun(t, store, scheduleID)
	t.Logf("killed the workers during the run: %d mails in the outbox", len(e2eOutboxMail(t, outbox)))
	if run == nil || run.Status != notification.RunRunning {
		t.Fatalf("the run is %+v at the kill, want RUNNING", run)
	}
	workers = startWorkers(2)
	e2eWaitFor(t, 2*time.Minute, 20*time.Millisecond, "the run finishes", func() (bool, string) {
		run = e2eNotificationRun(t, store, scheduleID)
		return run.Status != notification.RunRunning, run.Status
	}, append([]*e2eProc{serve}, workers...)...)
	// Two processes sent: each may leave its senders' claims uncertain.
	e2eCheckNotificationRun(t, store.Store, run, e2eOutboxMail(t, outbox), 2)
	t.Logf("run %d: %d sent, %d uncertain", run.ID, run.Sent, run.Uncertain)
}
