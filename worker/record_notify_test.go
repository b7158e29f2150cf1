//go:build record

package worker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/client"

	"iam/activities"
	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/notification"
	"iam/notify"
	"iam/notify/smtptest"
	"iam/worker"
	"iam/workflows"
)

func recordNotificationRuns(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	ctx := context.Background()
	srv, err := smtptest.Start(smtptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	mailer, err := notify.NewSMTPMailer(notify.SMTPConfig{Host: srv.Host, Port: srv.Port, TLS: notify.TLSNone, From: "iam@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	defer mailer.Close()
	w := worker.NewNotify(env.Temporal, env.Jobs.TaskQueue, env.Store, worker.NotifyDeps{Mail: mailer, Concurrency: 2})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var ids []int64
	for i := range 6 {
		u := &identity.User{OrgID: env.Org.ID, FirstName: fmt.Sprint("U", i), Email: fmt.Sprintf("u%d@example.com", i), Status: identity.UserActive}
		if err := env.Store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	g := &identity.Group{OrgID: env.Org.ID, Name: "Members"}
	if err := env.Store.Groups.Create(ctx, g, ids, nil); err != nil {
		t.Fatal(err)
	}
	tpl := &notification.Template{OrgID: env.Org.ID, Name: "Reminder", Module: notification.ModuleReports,
		Mail: &notification.MailTemplate{Subject: "Enrol, %first_name%", Content: "<p>Hello %display_name%</p>"}}
	if err := env.Store.Templates.Create(ctx, tpl, nil); err != nil {
		t.Fatal(err)
	}
	noSync := func(context.Context, *notification.NotificationSchedule, *notification.NotificationSchedule) error {
		return nil
	}
	for i, h := range notifyHistories {
		path := filepath.Join("testdata", h.file)
		if _, err := os.Stat(path); err == nil {
			continue // histories of older code stay as they were recorded
		}
		tplID := tpl.ID
		if h.summaryTo != nil {
			own := &notification.Template{OrgID: env.Org.ID, Name: "Reminder with summary", Module: notification.ModuleReports,
				Mail: &notification.MailTemplate{To: h.summaryTo, Subject: "Enrol, %first_name%", Content: "<p>Hello %display_name%</p>"}}
			if err := env.Store.Templates.Create(ctx, own, nil); err != nil {
				t.Fatal(err)
			}
			tplID = own.ID
		}
		sc := &notification.NotificationSchedule{OrgID: env.Org.ID, Name: fmt.Sprint("Schedule ", i), TemplateID: tplID, GroupIDs: []int64{g.ID},
			Settings: notification.ScheduleSettings{SchedulerInterval: notification.IntervalDaily, Hours: "9", Minutes: "0"}}
		if err := env.Store.Notifications.CreateSchedule(ctx, sc, 0, noSync); err != nil {
			t.Fatal(err)
		}
		if h.deleteSchedule {
			if err := env.Store.Notifications.DeleteSchedule(ctx, env.Org.ID, sc.ID, noSync); err != nil {
				t.Fatal(err)
			}
		}
		id := fmt.Sprint("notify-replay-", sc.ID)
		run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: env.Jobs.TaskQueue},
			workflows.NotifyWorkflowName, workflows.NotifyInput{OrgID: env.Org.ID, ScheduleID: sc.ID})
		if err != nil {
			t.Fatal(err)
		}
		var sum activities.RunSummary
		if err := run.Get(ctx, &sum); err != nil {
			t.Fatal(err)
		}
		writeHistory(t, env.Temporal, id, path)
	}
}
