package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/temporaltest"

	"iam/activities"
	"iam/api"
	"iam/api/apitest"
	"iam/api/auth"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/jobs"
	"iam/worker"
)

// TestOutage_TemporalStopped: with the workflow engine's frontend stopped,
// the routes that only read the database keep working; uploads are accepted
// QUEUED (the reconciler starts them later); deleting a job is 204, since the
// delete needs only the database (its workflow stops at its next write once
// the engine is back); and the schedule changes, which must reach the
// engine and cannot wait for it, answer 503 with Retry-After, changing
// nothing.
func TestOutage_TemporalStopped(t *testing.T) {
	ctx := context.Background()
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	tc, err := client.Dial(client.Options{HostPort: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	if err := worker.EnsureSearchAttributes(ctx, tc, ts.GetDefaultNamespace()); err != nil {
		t.Fatal(err)
	}
	db := dbtest.SQLite(t)
	env := apitest.New(t, db, apitest.Options{TemporalClient: tc})
	a := newAudience(t, env, env.Org, 2, 0)
	tok := env.Tokens.Mint(apiPrincipal(a.admin, "svc.quick_enrollment.ALL", "svc.job.ALL", "svc.user.READ", "svc.group.READ"))

	// A schedule and a started job, while the engine is up.
	resp := env.Do(apitest.Request{Method: "POST", Path: schedulesPath, Token: tok, Body: a.body("Morning reminder")})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create schedule: %d %s", resp.Status, resp.Body)
	}
	var created struct{ Data scheduleBody }
	resp.JSON(t, &created)
	sc := created.Data
	job := env.StartDiagnostic(env.Org, activities.DiagnosticParams{Items: 10})
	jobPath := "/api/v1/jobs/" + models.FormatID(job.ID)
	doomed := env.StartDiagnostic(env.Org, activities.DiagnosticParams{Items: 10})
	doomedPath := "/api/v1/jobs/" + models.FormatID(doomed.ID)

	ts.Stop()

	type outcome struct {
		name    string
		resp    *apitest.Response
		elapsed time.Duration
	}
	var mu sync.Mutex
	var outcomes []outcome
	var wg sync.WaitGroup
	do := func(name string, req apitest.Request) {
		wg.Go(func() {
			start := time.Now()
			r := env.Do(req)
			mu.Lock()
			outcomes = append(outcomes, outcome{name, r, time.Since(start)})
			mu.Unlock()
		})
	}
	get := func(path string) apitest.Request { return apitest.Request{Method: "GET", Path: path, Token: tok} }
	post := func(path string, body any) apitest.Request {
		return apitest.Request{Method: "POST", Path: path, Token: tok, Body: body}
	}
	schedule := schedulesPath + "/" + sc.ID
	reads := map[string]apitest.Request{
		"list jobs":      get("/api/v1/jobs"),
		"get job":        get(jobPath),
		"list users":     get("/api/v1/users"),
		"list groups":    get("/api/v1/groups"),
		"list schedules": get(schedulesPath),
		"get schedule":   get(schedule),
	}
	changes := map[string]apitest.Request{
		"create schedule": post(schedulesPath, a.body("Evening reminder")),
		"update schedule": {Method: "PATCH", Path: schedule, Token: tok, Body: map[string]any{"name": "Renamed"}},
		"delete schedule": {Method: "DELETE", Path: schedule, Token: tok},
		"pause schedule":  post(schedule+"/pause", nil),
		"resume schedule": post(schedule+"/resume", nil),
		"run schedule":    post(schedule+"/run-now", nil),
	}
	for name, req := range reads {
		do(name, req)
	}
	for name, req := range changes {
		do(name, req)
	}
	ids := factorIDs(t, env, env.Org)
	body, ct := form(t, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}}, "users.csv",
		[]byte("Primary Email,Email Address\n"+a.users[0].Email+",otp@example.com\n"))
	do("upload CSV", apitest.Request{Method: "POST", Path: "/api/v1/protection/quick-enrollment/upload-csv", Token: tok, Body: body,
		Header: http.Header{"Content-Type": {ct}}})
	do("delete job", apitest.Request{Method: "DELETE", Path: doomedPath, Token: tok})
	wg.Wait()

	for _, o := range outcomes {
		what := fmt.Sprintf("%s with the engine down (%v)", o.name, o.elapsed.Round(time.Millisecond))
		t.Log(what, o.resp.Status)
		switch _, isChange := changes[o.name]; {
		case isChange:
			if o.resp.Status != http.StatusServiceUnavailable || o.resp.Header.Get("Retry-After") != fmt.Sprint(auth.RetryAfterSeconds) ||
				o.resp.ErrorBody(t).Code != api.CodeUnavailable {
				t.Errorf("%s: %d Retry-After %q %s, want 503 %s with Retry-After %d", what, o.resp.Status,
					o.resp.Header.Get("Retry-After"), o.resp.Body, api.CodeUnavailable, auth.RetryAfterSeconds)
			}
		case o.name == "upload CSV":
			var acc acceptedBody
			o.resp.JSON(t, &acc)
			if o.resp.Status != http.StatusAccepted || acc.Data.Status != string(jobs.JobQueued) {
				t.Errorf("%s: %d %s, want 202 QUEUED", what, o.resp.Status, o.resp.Body)
			} else if j, err := env.Store.Jobs.Get(ctx, env.Org.ID, mustID(t, acc.Data.ID)); err != nil || j.Status != jobs.JobQueued {
				t.Errorf("%s: the job is not QUEUED for the reconciler: %+v %v", what, j, err)
			}
		case o.name == "delete job":
			if o.resp.Status != http.StatusNoContent {
				t.Errorf("%s: %d %s, want 204", what, o.resp.Status, o.resp.Body)
			}
		default:
			if o.resp.Status != http.StatusOK {
				t.Errorf("%s: %d %s, want 200", what, o.resp.Status, o.resp.Body)
			}
		}
		// Nothing waits on the engine longer than its bounds (2 s for the
		// engine's check, 5 s for a job's start or cancel), whatever the
		// machine's load.
		if o.elapsed > 8*time.Second {
			t.Errorf("%s took %v", what, o.elapsed)
		}
	}

	// The schedule changes changed nothing; the job is gone.
	resp = env.Get(schedule, tok)
	var after struct{ Data scheduleBody }
	resp.JSON(t, &after)
	if resp.Status != http.StatusOK || after.Data.Name != "Morning reminder" || !after.Data.IsEnabled {
		t.Errorf("the schedule after the refused changes: %d %s", resp.Status, resp.Body)
	}
	var list struct {
		Meta struct {
			Total int `json:"total_no_of_objects"`
		}
	}
	resp = env.Get(schedulesPath, tok)
	if resp.JSON(t, &list); list.Meta.Total != 1 {
		t.Errorf("schedules after the refused create: %s", resp.Body)
	}
	if resp = env.Get(doomedPath, tok); resp.Status != http.StatusNotFound {
		t.Errorf("the deleted job: %d %s", resp.Status, resp.Body)
	}
}
