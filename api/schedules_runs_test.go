package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/notification"
	"iam/models/sqldb"
	"iam/notify"
	"iam/worker"
)

type runItem struct {
	ID            string     `json:"id"`
	Status        string     `json:"status"`
	ScheduledTime time.Time  `json:"scheduled_time"`
	StartTime     time.Time  `json:"start_time"`
	EndTime       *time.Time `json:"end_time"`
	Recipients    int64      `json:"recipients"`
	Deliveries    int64      `json:"deliveries"`
	Sent          int64      `json:"sent"`
	Failed        int64      `json:"failed"`
	Uncertain     int64      `json:"uncertain"`
	Skipped       int64      `json:"skipped"`
}

type deliveryItem struct {
	Seq             int64   `json:"seq"`
	Kind            string  `json:"kind"`
	UserID          *string `json:"user_id"`
	UserDisplayName *string `json:"user_display_name"`
	Channel         string  `json:"channel"`
	Address         string  `json:"address"`
	Status          string  `json:"status"`
	Attempts        int     `json:"attempts"`
	LastError       string  `json:"last_error"`
	Uncertain       bool    `json:"uncertain"`
}

type offsetMeta struct {
	StartIndex int   `json:"start_index"`
	Limit      int   `json:"limit"`
	Total      int64 `json:"total_no_of_objects"`
}

func listRuns(t *testing.T, env *apitest.Env, tok, scheduleID, query string) ([]runItem, offsetMeta) {
	t.Helper()
	resp := env.Get(schedulesPath+"/"+scheduleID+"/runs"+query, tok)
	if resp.Status != 200 {
		t.Fatalf("GET runs%s: %d %s", query, resp.Status, resp.Body)
	}
	var page struct {
		Data []runItem
		Meta offsetMeta
	}
	resp.JSON(t, &page)
	return page.Data, page.Meta
}

func listDeliveries(t *testing.T, env *apitest.Env, tok, scheduleID, runID, query string) ([]deliveryItem, offsetMeta) {
	t.Helper()
	resp := env.Get(schedulesPath+"/"+scheduleID+"/runs/"+runID+"/deliveries"+query, tok)
	if resp.Status != 200 {
		t.Fatalf("GET deliveries%s: %d %s", query, resp.Status, resp.Body)
	}
	var page struct {
		Data []deliveryItem
		Meta offsetMeta
	}
	resp.JSON(t, &page)
	return page.Data, page.Meta
}

func filterQuery(f string) string { return "?filter=" + url.QueryEscape(f) }

// Runs and deliveries are read with the schedule read scopes, filtered and
// projected, and are 404 to another organization and under another
// schedule.
func TestScheduleRuns_ListedWithinTheOrganization(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		env := apitest.New(t, db, apitest.Options{})
		a := newAudience(t, env, env.Org, 4, 1)
		ns := env.Store.Notifications
		noSync := func(context.Context, *notification.NotificationSchedule, *notification.NotificationSchedule) error {
			return nil
		}
		sc := &notification.NotificationSchedule{OrgID: env.Org.ID, Name: "Reminder", TemplateID: a.template.ID, GroupIDs: []int64{a.group},
			Settings: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "9", Minutes: "30"}}
		if err := ns.CreateSchedule(ctx, sc, a.admin.ID, noSync); err != nil {
			t.Fatal(err)
		}
		at := time.Date(2026, 5, 4, 9, 30, 0, 0, time.UTC)
		run, err := ns.PrepareRun(ctx, notification.PrepareRunInput{OrgID: env.Org.ID, ScheduleID: sc.ID, ScheduledAt: at})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ns.FinishRun(ctx, run.ID, "no mail server answered"); err != nil {
			t.Fatal(err)
		}
		id, runID := models.FormatID(sc.ID), models.FormatID(run.ID)

		for _, scope := range []string{"svc.quick_enrollment.READ", "svc.quick_enrollment.ALL"} {
			tok := env.Token(env.Org, scope)
			runs, meta := listRuns(t, env, tok, id, "")
			if len(runs) != 1 || meta.Total != 1 || meta.Limit != 100 {
				t.Fatalf("%s: runs %+v meta %+v", scope, runs, meta)
			}
			r := runs[0]
			if r.ID != runID || r.Status != "COMPLETED" || !r.ScheduledTime.Equal(at) || r.EndTime == nil ||
				r.Recipients != 3 || r.Skipped != 1 || r.Deliveries != 3 || r.Failed != 3 || r.Sent != 0 {
				t.Errorf("%s: run %+v; want 3 members messaged (1 enrolled, skipped), 3 failed", scope, r)
			}
		}
		tok := env.Token(env.Org, "svc.quick_enrollment.READ")
		if runs, _ := listRuns(t, env, tok, id, filterQuery(`status eq "RUNNING"`)); len(runs) != 0 {
			t.Errorf("filter status RUNNING: %+v", runs)
		}
		ds, meta := listDeliveries(t, env, tok, id, runID, "")
		if len(ds) != 3 || meta.Total != 3 {
			t.Fatalf("deliveries %+v meta %+v", ds, meta)
		}
		d := ds[0]
		if d.Seq != 1 || d.Kind != "member" || d.UserID == nil || *d.UserID != models.FormatID(a.users[1].ID) ||
			d.UserDisplayName == nil || *d.UserDisplayName != "Member001" || d.Channel != "mail" || d.Address != a.users[1].Email ||
			d.Status != "failed" || d.LastError != "no mail server answered" || d.Uncertain {
			t.Errorf("first delivery %+v", d)
		}
		if ds, _ := listDeliveries(t, env, tok, id, runID, filterQuery(`channel eq "sms"`)); len(ds) != 0 {
			t.Errorf("filter channel sms: %+v", ds)
		}
		if ds, _ := listDeliveries(t, env, tok, id, runID, filterQuery(`status eq "failed" and channel eq "mail"`)+"&limit=2&from=2"); len(ds) != 1 || ds[0].Seq != 3 {
			t.Errorf("second page of failed mail: %+v", ds)
		}
		resp := env.Get(schedulesPath+"/"+id+"/runs/"+runID+"/deliveries?fields=status", tok)
		var projected struct{ Data []map[string]any }
		resp.JSON(t, &projected)
		if resp.Status != 200 || len(projected.Data) != 3 || len(projected.Data[0]) != 1 || projected.Data[0]["status"] != "failed" {
			t.Errorf("fields=status: %d %s", resp.Status, resp.Body)
		}

		for _, bad := range []string{filterQuery(`bogus eq 1`), "?sort=address_book", "?limit=0"} {
			if resp := env.Get(schedulesPath+"/"+id+"/runs"+bad, tok); resp.Status != 400 {
				t.Errorf("runs%s: %d %s", bad, resp.Status, resp.Body)
			}
			if resp := env.Get(schedulesPath+"/"+id+"/runs/"+runID+"/deliveries"+bad, tok); resp.Status != 400 {
				t.Errorf("deliveries%s: %d %s", bad, resp.Status, resp.Body)
			}
		}
		if resp := env.Get(schedulesPath+"/"+id+"/runs", env.Token(env.Org, "svc.user.READ")); resp.Status != 403 {
			t.Errorf("runs with another scope: %d %s", resp.Status, resp.Body)
		}

		other := env.NewOrg("Other")
		otherTok := env.Token(other, "svc.quick_enrollment.ALL")
		notFound := func(path, token, title string) {
			t.Helper()
			resp := env.Get(path, token)
			if resp.Status != 404 || resp.ErrorBody(t).Title != title {
				t.Errorf("GET %s: %d %s; want 404 %s", path, resp.Status, resp.Body, title)
			}
		}
		notFound(schedulesPath+"/"+id+"/runs", otherTok, "Schedule Not Found")
		notFound(schedulesPath+"/"+id+"/runs/"+runID+"/deliveries", otherTok, "Schedule Not Found")
		notFound(schedulesPath+"/x/runs", tok, "Schedule Not Found")
		notFound(schedulesPath+"/"+id+"/runs/"+models.FormatID(sqldb.NewID())+"/deliveries", tok, "Run Not Found")
		notFound(schedulesPath+"/"+id+"/runs/x/deliveries", tok, "Run Not Found")
		sc2 := &notification.NotificationSchedule{OrgID: env.Org.ID, Name: "Other", TemplateID: a.template.ID, GroupIDs: []int64{a.group},
			Settings: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "10", Minutes: "0"}}
		if err := ns.CreateSchedule(ctx, sc2, a.admin.ID, noSync); err != nil {
			t.Fatal(err)
		}
		notFound(schedulesPath+"/"+models.FormatID(sc2.ID)+"/runs/"+runID+"/deliveries", tok, "Run Not Found")
	})
}

// smsHook is an SMS webhook that records what it is sent.
type smsHook struct {
	mu   sync.Mutex
	sent []map[string]string
}

func (h *smsHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]string
	_ = json.NewDecoder(r.Body).Decode(&body)
	h.mu.Lock()
	h.sent = append(h.sent, body)
	h.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (h *smsHook) bodies() []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]string(nil), h.sent...)
}

// A real run through Temporal and the SMTP server: every member gets their
// own message, the template's own addresses one summary each (mail.to and
// mail.cc one mail, each sms.to number one SMS), and the run and every
// delivery, summaries included, are listed afterwards.
func TestScheduleRuns_RealRunListedAndSummarizedToTheTemplatesAddresses(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		removeTemporalSchedules(t, env)
		srv, mailer := startSMTP(t)
		hook := &smsHook{}
		hookSrv := httptest.NewServer(hook)
		t.Cleanup(hookSrv.Close)
		gw, err := notify.NewWebhookGateway(notify.WebhookConfig{URL: hookSrv.URL})
		if err != nil {
			t.Fatal(err)
		}
		w := worker.NewNotify(env.Temporal, env.Jobs.TaskQueue, env.Store, worker.NotifyDeps{Mail: mailer, SMS: gw, Concurrency: 4})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)

		a := newAudience(t, env, env.Org, 6, 1) // 5 members to message, 1 enrolled
		a.template = &notification.Template{OrgID: env.Org.ID, Name: "Reminder with summary", Module: "Reports",
			Mail: &notification.MailTemplate{To: []string{"SELF", "ops@example.com"}, Cc: []string{"audit@example.com"},
				Subject: "Please enrol, %first_name%", Content: "<p>Hello %display_name%, please enrol.</p>"},
			SMS: &notification.SMSTemplate{To: []string{"SELF", "+14155550199"}, Content: "Please enrol, %first_name%"}}
		if err := env.Store.Templates.Create(ctx, a.template, nil); err != nil {
			t.Fatal(err)
		}
		tok := env.Token(env.Org, "svc.quick_enrollment.ALL")
		body := a.body("Weekly reminder")
		body["is_enabled"] = false
		resp := env.Do(apitest.Request{Method: "POST", Path: schedulesPath, Token: tok, Body: body})
		var created struct{ Data scheduleBody }
		resp.JSON(t, &created)
		if resp.Status != 201 {
			t.Fatalf("POST: %d %s", resp.Status, resp.Body)
		}
		id := created.Data.ID
		if resp := env.Do(apitest.Request{Method: "POST", Path: schedulesPath + "/" + id + "/run-now", Token: tok}); resp.Status != 202 {
			t.Fatalf("run-now: %d %s", resp.Status, resp.Body)
		}
		waitRun(t, env, id, 60*time.Second)

		// The summaries go out after the run has ended.
		var runs []runItem
		var ds []deliveryItem
		deadline := time.Now().Add(30 * time.Second)
		for {
			runs, _ = listRuns(t, env, tok, id, "")
			if len(runs) != 1 {
				t.Fatalf("runs %+v", runs)
			}
			ds, _ = listDeliveries(t, env, tok, id, runs[0].ID, filterQuery(`kind eq "summary"`))
			if len(ds) == 2 && ds[0].Status == "sent" && ds[1].Status == "sent" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("summaries not sent: %+v", ds)
			}
			time.Sleep(100 * time.Millisecond)
		}
		r := runs[0]
		if r.Status != "COMPLETED" || r.Recipients != 5 || r.Skipped != 1 || r.Deliveries != 10 || r.Sent != 5 || r.Failed != 5 || r.EndTime == nil {
			t.Errorf("run %+v; want 5 members: 5 mails sent, 5 SMS failed (no numbers), 1 skipped", r)
		}
		if ds[0].Seq != 11 || ds[0].Channel != "mail" || ds[0].Address != "ops@example.com; cc: audit@example.com" || ds[0].UserID != nil ||
			ds[1].Seq != 12 || ds[1].Channel != "sms" || ds[1].Address != "+14155550199" || ds[1].Attempts != 1 {
			t.Errorf("summary deliveries %+v", ds)
		}
		members, meta := listDeliveries(t, env, tok, id, r.ID, filterQuery(`kind eq "member" and channel eq "sms"`))
		if len(members) != 5 || meta.Total != 5 || members[0].Status != "failed" || members[0].LastError != "the user has no mobile number" ||
			members[0].UserDisplayName == nil || *members[0].UserDisplayName != "Member001" {
			t.Errorf("member SMS deliveries %+v", members)
		}
		if sent, _ := listDeliveries(t, env, tok, id, r.ID, filterQuery(`status eq "sent"`)); len(sent) != 7 {
			t.Errorf("%d deliveries sent, want 7 (5 member mails, 2 summaries)", len(sent))
		}

		// The SMTP server got one mail per member and one summary for both
		// of the template's addresses; nobody got anything twice.
		got := map[string]int{}
		var summary []byte
		for _, m := range srv.Messages() {
			for _, to := range m.To {
				got[to]++
			}
			if len(m.To) == 2 {
				summary = m.Data
			}
		}
		for i, u := range a.users {
			if want := min(i, 1); got[u.Email] != want {
				t.Errorf("%s got %d messages, want %d", u.Email, got[u.Email], want)
			}
		}
		if got["ops@example.com"] != 1 || got["audit@example.com"] != 1 || srv.Count() != 6 {
			t.Errorf("messages by address %v (%d messages); want one summary to ops and audit", got, srv.Count())
		}
		for _, want := range []string{"Cc: <audit@example.com>", `The notification schedule "Weekly reminder" ran.`, "Members messaged: 5 (10 messages)",
			"Sent: 5", "Failed: 5", "Skipped (already enrolled or not active): 1"} {
			if !strings.Contains(string(summary), want) {
				t.Errorf("summary mail lacks %q:\n%s", want, summary)
			}
		}
		sms := hook.bodies()
		if len(sms) != 1 || sms[0]["to"] != "+14155550199" || !strings.Contains(sms[0]["message"], "5 sent, 5 failed, 0 uncertain, 1 skipped") {
			t.Errorf("SMS sent %v; want one summary to +14155550199", sms)
		}
	})
}
