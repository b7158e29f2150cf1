package notification_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/notification"
)

// A finished run gets its summary deliveries once: one mail for the
// template's mail.to and mail.cc addresses, one SMS per sms.to number;
// recipient macros are members, not summary addresses. The summaries are
// not counted with the members' deliveries, and finishing again leaves them
// alone.
func TestNotificationStore_PrepareSummary(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		f := newNotifyFixture(t, db, "UTC")
		ns := f.store.Notifications
		tpl := &notification.Template{OrgID: f.org.ID, Name: "With summary", Module: "Reports",
			Mail: &notification.MailTemplate{To: []string{"SELF", "Ops@example.com", "ops@example.com"}, Cc: []string{"Manager", "audit@example.com"},
				Subject: "Enrol, %first_name%", Content: "<p>Hi %display_name%</p>"},
			SMS: &notification.SMSTemplate{To: []string{"SELF", "+14155550199"}, Content: "Enrol, %first_name%"}}
		if err := f.store.Templates.Create(ctx, tpl, nil); err != nil {
			t.Fatal(err)
		}
		sc := &notification.NotificationSchedule{OrgID: f.org.ID, Name: "Nightly", TemplateID: tpl.ID, GroupIDs: f.groups,
			Settings: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "1", Minutes: "30"}}
		if err := ns.CreateSchedule(ctx, sc, 0, noSync); err != nil {
			t.Fatal(err)
		}
		run, err := ns.PrepareRun(ctx, notification.PrepareRunInput{OrgID: f.org.ID, ScheduleID: sc.ID, ScheduledAt: time.Date(2026, 3, 2, 1, 30, 0, 0, time.UTC)})
		if err != nil || run.Total != 6 {
			t.Fatalf("run %+v, %v", run, err)
		}
		if from, to, sumErr := ns.PrepareSummary(ctx, run.ID); sumErr != nil || from != 7 || to != 7 {
			t.Errorf("summary of a running run: [%d, %d) %v; want none", from, to, sumErr)
		}
		if _, err = ns.FinishRun(ctx, run.ID, "gave up"); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			from, to, sumErr := ns.PrepareSummary(ctx, run.ID)
			if sumErr != nil || from != 7 || to != 9 {
				t.Fatalf("summary range [%d, %d) %v; want [7, 9)", from, to, sumErr)
			}
		}
		all, err := ns.Deliveries(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range all[6:] {
			got = append(got, fmt.Sprintf("%d:%s:%s:%s:%s:%d", d.Seq, d.Kind, d.Channel, d.Address, d.State, d.UserID))
		}
		want := "[7:summary:mail:Ops@example.com; cc: audit@example.com:pending:0 8:summary:sms:+14155550199:pending:0]"
		if len(all) != 8 || fmt.Sprint(got) != want {
			t.Errorf("summary deliveries %v (of %d), want %s", got, len(all), want)
		}
		again, err := ns.FinishRun(ctx, run.ID, "gave up")
		if err != nil || again.Failed != 6 || again.Sent != 0 {
			t.Errorf("finishing again: %+v, %v; want the members' 6 failed alone", again, err)
		}
		if ds, _ := ns.Deliveries(ctx, run.ID); ds[6].State != notification.DeliveryPending || ds[7].State != notification.DeliveryPending {
			t.Errorf("finishing again touched the summaries: %+v", ds[6:])
		}
	})
}
