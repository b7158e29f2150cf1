package api_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
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
		noSync := func(context.Context, *models.NotificationSchedule, *models.NotificationSchedule) error { return nil }
		sc := &models.NotificationSchedule{OrgID: env.Org.ID, Name: "Reminder", TemplateID: a.template.ID, GroupIDs: []int64{a.group},
			Settings: models.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "9", Minutes: "30"}}
		if err := ns.CreateSchedule(ctx, sc, a.admin.ID, noSync); err != nil {
			t.Fatal(err)
		}
		at := time.Date(2026, 5, 4, 9, 30, 0, 0, time.UTC)
		run, err := ns.PrepareRun(ctx, models.PrepareRunInput{OrgID: env.Org.ID, ScheduleID: sc.ID, ScheduledAt: at})
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
		notFound(schedulesPath+"/"+id+"/runs/"+models.FormatID(models.NewID())+"/deliveries", tok, "Run Not Found")
		notFound(schedulesPath+"/"+id+"/runs/x/deliveries", tok, "Run Not Found")
		sc2 := &models.NotificationSchedule{OrgID: env.Org.ID, Name: "Other", TemplateID: a.template.ID, GroupIDs: []int64{a.group},
			Settings: models.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "10", Minutes: "0"}}
		if err := ns.CreateSchedule(ctx, sc2, a.admin.ID, noSync); err != nil {
			t.Fatal(err)
		}
		notFound(schedulesPath+"/"+models.FormatID(sc2.ID)+"/runs/"+runID+"/deliveries", tok, "Run Not Found")
	})
}
