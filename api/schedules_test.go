package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"iam/activities"
	"iam/api/apitest"
	"iam/api/auth"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/identity"
	"iam/models/notification"
	"iam/notify"
	"iam/notify/smtptest"
	"iam/worker"
	"iam/workflows"
)

const schedulesPath = "/api/v1/protection/quick-enrollment/notification-auto-schedule"

type scheduleBody struct {
	ID                   string  `json:"id"`
	Name                 string  `json:"name"`
	Groups               []int64 `json:"groups"`
	NotificationTemplate struct {
		ID, Name string
	} `json:"notification_template"`
	IsEnabled  bool `json:"is_enabled"`
	Technician struct {
		ID, Name string
	} `json:"technician"`
	LastRunTime           *time.Time                    `json:"last_run_time"`
	NextRunTime           *time.Time                    `json:"next_run_time"`
	AssociatedGroupsCount string                        `json:"associated_groups_count"`
	ScheduleSettings      notification.ScheduleSettings `json:"schedule_settings"`
}

// audience is a group of n users of org (the first enrolled of them
// enrolled) and a mail template.
type audience struct {
	group    int64
	users    []*identity.User
	template *notification.Template
	admin    *identity.User
}

func newAudience(t *testing.T, env *apitest.Env, org *identity.Organization, n, enrolled int) *audience {
	t.Helper()
	ctx := context.Background()
	a := &audience{}
	a.admin = &identity.User{OrgID: org.ID, FirstName: "Ada", LastName: "Admin", Email: fmt.Sprintf("admin-%d@example.com", org.ID), Status: identity.UserActive}
	if err := env.Store.Users.Create(ctx, a.admin, ""); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range n {
		u := &identity.User{OrgID: org.ID, FirstName: fmt.Sprintf("Member%03d", i), Email: fmt.Sprintf("m%03d-%d@example.com", i, org.ID), Status: identity.UserActive}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		a.users = append(a.users, u)
		ids = append(ids, u.ID)
	}
	g := &identity.Group{OrgID: org.ID, Name: "Members"}
	if err := env.Store.Groups.Create(ctx, g, ids, nil); err != nil {
		t.Fatal(err)
	}
	a.group = g.ID
	if enrolled > 0 {
		configs, err := env.Store.Factors.List(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range a.users[:enrolled] {
			e := &enrollment.Enrollment{OrgID: org.ID, UserID: u.ID, FactorConfigID: configs[0].ID, FactorType: configs[0].Type, Value: "x", UpdatedAt: time.Now()}
			if _, err := env.DB.NewInsert().Model(e).Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.template = &notification.Template{OrgID: org.ID, Name: "Enrol reminder", Module: "Reports",
		Mail: &notification.MailTemplate{Subject: "Please enrol, %first_name%", Content: "<p>Hello %display_name%, please enrol.</p>"}}
	if err := env.Store.Templates.Create(ctx, a.template, nil); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *audience) body(name string) map[string]any {
	return map[string]any{
		"name": name, "description": "remind members who have not enrolled", "groups": []int64{a.group},
		"notification_template_id": models.FormatID(a.template.ID),
		"schedule_settings":        map[string]any{"scheduler_interval": "DAILY", "hours": "09", "minutes": "30"},
	}
}

// removeTemporalSchedules deletes, when the test ends, the Temporal
// Schedules the test's schedules left on the shared server.
func removeTemporalSchedules(t *testing.T, env *apitest.Env) {
	t.Cleanup(func() {
		var ids []int64
		_ = env.DB.NewSelect().Table("notification_schedules").Column("id").Scan(context.Background(), &ids)
		for _, id := range ids {
			_ = env.Temporal.ScheduleClient().GetHandle(context.Background(), notification.NotificationScheduleID(id)).Delete(context.Background())
		}
	})
}

func describe(t *testing.T, env *apitest.Env, id string) *client.ScheduleDescription {
	t.Helper()
	n, _ := models.ParseID("id", id)
	d, err := env.Temporal.ScheduleClient().GetHandle(context.Background(), notification.NotificationScheduleID(n)).Describe(context.Background())
	if err != nil {
		t.Fatalf("describe Temporal schedule: %v", err)
	}
	return d
}

// checkRunPolicy checks what docs/notifications.md promises of every schedule's
// runs: they never overlap (a run due while one is in progress waits for it,
// Temporal's BUFFER_ONE), and a run missed while Temporal was down still
// starts up to 6 hours late (the catch-up window), not later.
func checkRunPolicy(t *testing.T, d *client.ScheduleDescription) {
	t.Helper()
	p := d.Schedule.Policy
	if p == nil || p.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE || p.CatchupWindow != 6*time.Hour {
		t.Errorf("Temporal schedule policies %+v, want overlap BUFFER_ONE and a catch-up window of 6h", p)
	}
}

func TestSchedules_LifecycleMirrorsTemporal(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		removeTemporalSchedules(t, env)
		ctx := context.Background()
		if _, err := env.DB.NewUpdate().Table("organizations").Set("time_zone = ?", "Asia/Kolkata").Where("id = ?", env.Org.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		a := newAudience(t, env, env.Org, 2, 0)
		tok := env.Tokens.Mint(apiPrincipal(a.admin, "svc.quick_enrollment.ALL"))

		resp := env.Do(apitest.Request{Method: "POST", Path: schedulesPath, Token: tok, Body: a.body("Morning reminder")})
		var created struct{ Data scheduleBody }
		resp.JSON(t, &created)
		sc := created.Data
		if resp.Status != http.StatusCreated || sc.Technician.Name != "Ada Admin" || sc.NotificationTemplate.Name != "Enrol reminder" ||
			sc.AssociatedGroupsCount != "1" || len(sc.Groups) != 1 || sc.ScheduleSettings.Hours != "9" || !sc.IsEnabled || sc.NextRunTime == nil {
			t.Fatalf("POST: %d %s", resp.Status, resp.Body)
		}
		if local := sc.NextRunTime.In(mustLoc(t, "Asia/Kolkata")); local.Hour() != 9 || local.Minute() != 30 {
			t.Errorf("next run %v is not 09:30 in Kolkata", sc.NextRunTime)
		}
		d := describe(t, env, sc.ID)
		if d.Schedule.Spec.TimeZoneName != "Asia/Kolkata" || d.Schedule.State.Paused {
			t.Errorf("Temporal schedule spec %+v state %+v", d.Schedule.Spec, d.Schedule.State)
		}
		checkRunPolicy(t, d)
		if act, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction); !ok || act.TaskQueue != env.Jobs.TaskQueue {
			t.Errorf("Temporal schedule action %+v", d.Schedule.Action)
		}

		// PATCH to weekly on Mondays at 08:05.
		resp = env.Do(apitest.Request{Method: "PATCH", Path: schedulesPath + "/" + sc.ID, Token: tok,
			Body: map[string]any{"schedule_settings": map[string]any{"scheduler_interval": "weekly", "day_of_week": "1", "hours": "8", "minutes": "5"}}})
		var patched struct{ Data scheduleBody }
		resp.JSON(t, &patched)
		if resp.Status != 200 || patched.Data.ScheduleSettings.DayOfWeek != "1" || patched.Data.Name != "Morning reminder" {
			t.Fatalf("PATCH: %d %s", resp.Status, resp.Body)
		}
		if next := patched.Data.NextRunTime.In(mustLoc(t, "Asia/Kolkata")); next.Weekday() != time.Monday || next.Hour() != 8 || next.Minute() != 5 {
			t.Errorf("next run after PATCH: %v", next)
		}
		checkRunPolicy(t, describe(t, env, sc.ID))

		resp = env.Do(apitest.Request{Method: "POST", Path: schedulesPath + "/" + sc.ID + "/pause", Token: tok})
		var paused struct{ Data scheduleBody }
		resp.JSON(t, &paused)
		if resp.Status != 200 || paused.Data.IsEnabled || paused.Data.NextRunTime != nil || !describe(t, env, sc.ID).Schedule.State.Paused {
			t.Fatalf("pause: %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "POST", Path: schedulesPath + "/" + sc.ID + "/resume", Token: tok})
		if resp.Status != 200 || describe(t, env, sc.ID).Schedule.State.Paused {
			t.Fatalf("resume: %d %s", resp.Status, resp.Body)
		}

		var list struct {
			Data []map[string]any
			Meta struct {
				Total int `json:"total_no_of_objects"`
			}
		}
		resp = env.Get(schedulesPath, tok)
		resp.JSON(t, &list)
		if resp.Status != 200 || list.Meta.Total != 1 || list.Data[0]["technician"] != "Ada Admin" || list.Data[0]["groups"] != nil || list.Data[0]["associated_groups_count"] != "1" {
			t.Fatalf("list: %d %s", resp.Status, resp.Body)
		}

		resp = env.Do(apitest.Request{Method: "DELETE", Path: schedulesPath + "/" + sc.ID, Token: tok})
		if resp.Status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", resp.Status, resp.Body)
		}
		if _, err := env.Temporal.ScheduleClient().GetHandle(ctx, notification.NotificationScheduleID(mustID(t, sc.ID))).Describe(ctx); err == nil {
			t.Error("the Temporal schedule outlived its row")
		}
		if resp := env.Get(schedulesPath+"/"+sc.ID, tok); resp.Status != 404 || resp.ErrorBody(t).Title != "Schedule Not Found" {
			t.Errorf("GET deleted: %d %s", resp.Status, resp.Body)
		}
	})
}

func TestSchedules_BadInputAndNothingHalfWritten(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		removeTemporalSchedules(t, env)
		a := newAudience(t, env, env.Org, 1, 0)
		tok := env.Token(env.Org, "svc.quick_enrollment.WRITE", "svc.quick_enrollment.READ")
		for _, tc := range []struct {
			name   string
			change func(map[string]any)
			field  string
		}{
			{"unknown group", func(b map[string]any) { b["groups"] = []int64{a.group, 12345} }, "groups[1]"},
			{"no group", func(b map[string]any) { b["groups"] = []int64{} }, "groups"},
			{"bad template id", func(b map[string]any) { b["notification_template_id"] = "abc" }, "notification_template_id"},
			{"unknown template", func(b map[string]any) { b["notification_template_id"] = "777" }, "notification_template_id"},
			{"hour 24", func(b map[string]any) {
				b["schedule_settings"] = map[string]any{"scheduler_interval": "DAILY", "hours": "24", "minutes": "0"}
			}, "schedule_settings.hours"},
			{"weekly without a day", func(b map[string]any) {
				b["schedule_settings"] = map[string]any{"scheduler_interval": "WEEKLY", "hours": "1", "minutes": "0"}
			}, "schedule_settings.day_of_week"},
			{"hourly", func(b map[string]any) {
				b["schedule_settings"] = map[string]any{"scheduler_interval": "HOURLY", "hours": "1", "minutes": "0"}
			}, "schedule_settings.scheduler_interval"},
			{"groups as strings", func(b map[string]any) { b["groups"] = []string{"1"} }, "groups"},
			{"missing name", func(b map[string]any) { delete(b, "name") }, "name"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				b := a.body("Reminder")
				tc.change(b)
				resp := env.Do(apitest.Request{Method: "POST", Path: schedulesPath, Token: tok, Body: b})
				if resp.Status != 400 || !strings.HasPrefix(resp.ErrorBody(t).Detail, tc.field+": ") {
					t.Errorf("%d %s; want 400 naming %s", resp.Status, resp.Body, tc.field)
				}
			})
		}
		if resp := env.Get(schedulesPath, tok); !strings.Contains(string(resp.Body), `"total_no_of_objects":0`) {
			t.Errorf("refused writes left rows: %s", resp.Body)
		}
		// Without the workflow engine nothing is written either.
		down := apitest.New(t, db, apitest.Options{})
		downTok := down.Token(env.Org, "svc.quick_enrollment.ALL")
		resp := down.Do(apitest.Request{Method: "POST", Path: schedulesPath, Token: downTok, Body: a.body("Reminder")})
		if resp.Status != http.StatusServiceUnavailable {
			t.Errorf("POST without Temporal: %d %s", resp.Status, resp.Body)
		}
		if resp = env.Get(schedulesPath, tok); !strings.Contains(string(resp.Body), `"total_no_of_objects":0`) {
			t.Errorf("a schedule Temporal never saw was kept: %s", resp.Body)
		}
		// Another organization's schedule answers 404.
		resp = env.Do(apitest.Request{Method: "POST", Path: schedulesPath, Token: tok, Body: a.body("Reminder")})
		var created struct{ Data scheduleBody }
		resp.JSON(t, &created)
		other := env.Token(env.NewOrg("Other"), "svc.quick_enrollment.ALL")
		if resp := env.Get(schedulesPath+"/"+created.Data.ID, other); resp.Status != 404 {
			t.Errorf("another organization's schedule: %d", resp.Status)
		}
		if resp := env.Do(apitest.Request{Method: "POST", Path: schedulesPath, Token: tok, Body: a.body("reminder")}); resp.Status != 409 {
			t.Errorf("duplicate name: %d %s", resp.Status, resp.Body)
		}
		if resp := env.Do(apitest.Request{Method: "DELETE", Path: "/api/v1/templates/notification/" + models.FormatID(a.template.ID),
			Token: env.Token(env.Org, "svc.notification_template.ALL")}); resp.Status != 409 {
			t.Errorf("deleting the template of a schedule: %d %s", resp.Status, resp.Body)
		}
	})
}

// startNotifyWorker runs a notify worker for env with mailer.
func startNotifyWorker(t *testing.T, env *apitest.Env, mailer notify.Mailer) sdkworker.Worker {
	t.Helper()
	w := worker.NewNotify(env.Temporal, env.Jobs.TaskQueue, env.Store, worker.NotifyDeps{Mail: mailer, Concurrency: 4, ActivitiesPerSecond: 50})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

func startSMTP(t *testing.T) (*smtptest.Server, *notify.SMTPMailer) {
	t.Helper()
	srv, err := smtptest.Start(smtptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cerr := srv.Close(); cerr != nil {
			t.Error(cerr)
		}
	})
	m, err := notify.NewSMTPMailer(notify.SMTPConfig{Host: srv.Host, Port: srv.Port, TLS: notify.TLSNone, From: "iam@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv, m
}

// waitRun waits for the schedule's run to finish and returns it.
func waitRun(t *testing.T, env *apitest.Env, scheduleID string, timeout time.Duration) *notification.NotificationRun {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var runs []notification.NotificationRun
		err := env.DB.NewSelect().Model(&runs).Where("notification_id = ?", mustID(t, scheduleID)).Scan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 1 && runs[0].Status != notification.RunRunning {
			return &runs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("run of schedule %s not finished after %v: %+v", scheduleID, timeout, runs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestSchedules_RunNowNotifiesMembersWhoHaveNotEnrolled(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		removeTemporalSchedules(t, env)
		srv, mailer := startSMTP(t)
		startNotifyWorker(t, env, mailer)
		a := newAudience(t, env, env.Org, 30, 5)
		tok := env.Token(env.Org, "svc.quick_enrollment.ALL")
		body := a.body("Reminder")
		body["is_enabled"] = false // only run-now runs it
		resp := env.Do(apitest.Request{Method: "POST", Path: schedulesPath, Token: tok, Body: body})
		var created struct{ Data scheduleBody }
		resp.JSON(t, &created)
		if resp.Status != 201 || created.Data.NextRunTime != nil {
			t.Fatalf("POST paused: %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "POST", Path: schedulesPath + "/" + created.Data.ID + "/run-now", Token: tok})
		if resp.Status != http.StatusAccepted {
			t.Fatalf("run-now: %d %s", resp.Status, resp.Body)
		}
		run := waitRun(t, env, created.Data.ID, 60*time.Second)
		if run.Status != notification.RunCompleted || run.Total != 25 || run.Sent != 25 {
			t.Fatalf("run %+v; want 25 sent (30 members, 5 enrolled)", run)
		}
		got := map[string]int{}
		for _, m := range srv.Messages() {
			got[m.To[0]]++
		}
		for i, u := range a.users {
			want := 1
			if i < 5 {
				want = 0
			}
			if got[u.Email] != want {
				t.Errorf("%s got %d messages, want %d", u.Email, got[u.Email], want)
			}
		}
		resp = env.Get(schedulesPath+"/"+created.Data.ID, tok)
		var after struct{ Data scheduleBody }
		resp.JSON(t, &after)
		if after.Data.LastRunTime == nil {
			t.Errorf("last_run_time is null after a run: %s", resp.Body)
		}
	})
}

// dyingMailer sends until k messages were accepted, then "dies": sends in
// flight or started afterwards block until released and report nothing.
type dyingMailer struct {
	next     notify.Mailer
	k        int64
	accepted atomic.Int64
	dead     chan struct{}
	once     sync.Once
	release  chan struct{}
}

func (d *dyingMailer) Send(ctx context.Context, m *notify.Message) error {
	select {
	case <-d.dead:
		<-d.release
		return fmt.Errorf("dead")
	default:
	}
	err := d.next.Send(ctx, m)
	if err == nil && d.accepted.Add(1) >= d.k {
		d.once.Do(func() { close(d.dead) })
	}
	select {
	case <-d.dead:
		<-d.release
		return fmt.Errorf("dead")
	default:
		return err
	}
}

// A worker killed mid-run (its sends frozen, its heartbeats stopped) and
// another started: Temporal moves the chunk to the new worker after the
// heartbeat timeout, and nobody receives a message twice.
func TestSchedules_KillingTheWorkerMidRunSendsNobodyTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a heartbeat timeout")
	}
	db := dbtest.SQLite(t)
	env := apitest.New(t, db, apitest.Options{Temporal: true})
	removeTemporalSchedules(t, env)
	srv, mailer := startSMTP(t)
	dying := &dyingMailer{next: mailer, k: 60, dead: make(chan struct{}), release: make(chan struct{})}
	defer close(dying.release)
	first := sdkworker.New(env.Temporal, workflows.NotifyTaskQueueFor(env.Jobs.TaskQueue), sdkworker.Options{DisableWorkflowWorker: true})
	first.RegisterActivity(&activities.Notifications{Store: env.Store, Mail: dying, Concurrency: 4, ClaimBatch: 4})
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	a := newAudience(t, env, env.Org, 200, 0)
	tok := env.Token(env.Org, "svc.quick_enrollment.ALL")
	body := a.body("Reminder")
	body["is_enabled"] = false
	resp := env.Do(apitest.Request{Method: "POST", Path: schedulesPath, Token: tok, Body: body})
	var created struct{ Data scheduleBody }
	resp.JSON(t, &created)
	if resp := env.Do(apitest.Request{Method: "POST", Path: schedulesPath + "/" + created.Data.ID + "/run-now", Token: tok}); resp.Status != 202 {
		t.Fatalf("run-now: %d %s", resp.Status, resp.Body)
	}
	select {
	case <-dying.dead:
	case <-time.After(60 * time.Second):
		t.Fatal("the first worker never got to send")
	}
	first.Stop() // the worker is gone; its frozen sends never record anything
	startNotifyWorker(t, env, mailer)

	run := waitRun(t, env, created.Data.ID, 120*time.Second)
	got := map[string]int{}
	for _, m := range srv.Messages() {
		got[m.To[0]]++
		if got[m.To[0]] > 1 {
			t.Errorf("%s received %d messages", m.To[0], got[m.To[0]])
		}
	}
	if run.Total != 200 || run.Sent+run.Uncertain != 200 || run.Uncertain > 4*4 || int64(srv.Count()) < run.Sent || int64(srv.Count()) > run.Sent+run.Uncertain {
		t.Errorf("run %+v; server got %d messages", run, srv.Count())
	}
	t.Logf("killed after %d accepted; run: %d sent, %d uncertain; server got %d messages for %d addresses", dying.accepted.Load(), run.Sent, run.Uncertain, srv.Count(), len(got))
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// apiPrincipal is a token holder who is user u.
func apiPrincipal(u *identity.User, scopes ...string) auth.Principal {
	return auth.Principal{UserID: u.ID, OrgID: u.OrgID, Scopes: scopes}
}

// TestSchedules_ConcurrentWritesAnswerAtOnce: schedule writes arriving
// together all succeed at once. (The organization's time zone used to be
// read inside each write's transaction on a second connection: with more
// writes at once than SQLite's pool has connections, each held one and
// waited for another until its 10 s timeout, and answered 503.)
func TestSchedules_ConcurrentWritesAnswerAtOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		removeTemporalSchedules(t, env)
		a := newAudience(t, env, env.Org, 1, 0)
		tok := env.Tokens.Mint(apiPrincipal(a.admin, "svc.quick_enrollment.ALL"))
		const writers = 8
		began := time.Now()
		statuses := make(chan string, writers)
		for i := range writers {
			go func() {
				resp := env.Do(apitest.Request{Method: "POST", Path: schedulesPath, Token: tok, Body: a.body(fmt.Sprintf("Reminder %d", i))})
				statuses <- fmt.Sprintf("%d %s", resp.Status, resp.Body)
			}()
		}
		for range writers {
			if s := <-statuses; !strings.HasPrefix(s, "201 ") {
				t.Errorf("a concurrent create answered %.300s", s)
			}
		}
		if took := time.Since(began); took > 8*time.Second {
			t.Errorf("%d concurrent creates took %v", writers, took)
		}
	})
}
