package notification_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/identity"
	"iam/models/notification"
	"iam/models/store"
)

func TestScheduleSettings_Check(t *testing.T) {
	for _, tc := range []struct {
		in    notification.ScheduleSettings
		want  notification.ScheduleSettings
		field string
	}{
		{in: notification.ScheduleSettings{SchedulerInterval: "daily", Hours: "09", Minutes: "5", DayOfWeek: "3"},
			want: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "9", Minutes: "5"}},
		{in: notification.ScheduleSettings{SchedulerInterval: "WEEKLY", Hours: "23", Minutes: "59", DayOfWeek: "0", DayOfMonth: "4"},
			want: notification.ScheduleSettings{SchedulerInterval: "WEEKLY", Hours: "23", Minutes: "59", DayOfWeek: "0"}},
		{in: notification.ScheduleSettings{SchedulerInterval: "MONTHLY", Hours: "0", Minutes: "0", DayOfMonth: "31", MonthOfYear: "12"},
			want: notification.ScheduleSettings{SchedulerInterval: "MONTHLY", Hours: "0", Minutes: "0", DayOfMonth: "31", MonthOfYear: "12"}},
		{in: notification.ScheduleSettings{SchedulerInterval: "HOURLY", Hours: "1", Minutes: "0"}, field: "schedule_settings.scheduler_interval"},
		{in: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "24", Minutes: "0"}, field: "schedule_settings.hours"},
		{in: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "1", Minutes: "-1"}, field: "schedule_settings.minutes"},
		{in: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "1"}, field: "schedule_settings.minutes"},
		{in: notification.ScheduleSettings{SchedulerInterval: "WEEKLY", Hours: "1", Minutes: "0", DayOfWeek: "7"}, field: "schedule_settings.day_of_week"},
		{in: notification.ScheduleSettings{SchedulerInterval: "WEEKLY", Hours: "1", Minutes: "0"}, field: "schedule_settings.day_of_week"},
		{in: notification.ScheduleSettings{SchedulerInterval: "MONTHLY", Hours: "1", Minutes: "0", DayOfMonth: "0"}, field: "schedule_settings.day_of_month"},
		{in: notification.ScheduleSettings{SchedulerInterval: "MONTHLY", Hours: "1", Minutes: "0", DayOfMonth: "1", MonthOfYear: "13"}, field: "schedule_settings.month_of_year"},
		{in: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "1.5", Minutes: "0"}, field: "schedule_settings.hours"},
	} {
		s := tc.in
		_, err := s.Check("schedule_settings")
		if got := fieldOf(err); got != tc.field {
			t.Errorf("%+v: field %q (%v), want %q", tc.in, got, err, tc.field)
		}
		if tc.field == "" && s != tc.want {
			t.Errorf("%+v canonical %+v, want %+v", tc.in, s, tc.want)
		}
	}
}

// notifyFixture is an organization with users, two groups and a template.
type notifyFixture struct {
	store    *store.Store
	org      *identity.Organization
	users    []*identity.User // ann, bob, cat (inactive), dan (no mobile), eve (enrolled)
	groups   []int64
	template *notification.Template
}

func newNotifyFixture(t *testing.T, db *bun.DB, tz string) *notifyFixture {
	t.Helper()
	ctx := context.Background()
	f := &notifyFixture{store: store.NewStore(db)}
	f.org = &identity.Organization{Name: "Acme", TimeZone: tz}
	if err := f.store.Orgs.Create(ctx, f.org); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"ann", "bob", "cat", "dan", "eve"} {
		u := &identity.User{OrgID: f.org.ID, FirstName: name, Email: name + "@example.com", MobileNumber: fmt.Sprintf("+1415555010%d", i), Status: identity.UserActive, Role: identity.RoleUser}
		if name == "cat" {
			u.Status = identity.UserInactive
		}
		if name == "dan" {
			u.MobileNumber = ""
		}
		if err := f.store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		f.users = append(f.users, u)
	}
	ids := func(us ...*identity.User) []int64 {
		var out []int64
		for _, u := range us {
			out = append(out, u.ID)
		}
		return out
	}
	for i, members := range [][]int64{ids(f.users[0], f.users[1], f.users[2]), ids(f.users[1], f.users[3], f.users[4])} {
		g := &identity.Group{OrgID: f.org.ID, Name: fmt.Sprintf("Group %d", i)}
		if err := f.store.Groups.Create(ctx, g, members, nil); err != nil {
			t.Fatal(err)
		}
		f.groups = append(f.groups, g.ID)
	}
	configs, err := store.NewStore(db).Factors.List(ctx, f.org.ID)
	if err != nil || len(configs) == 0 {
		t.Fatalf("factor configs: %v", err)
	}
	enrolled := &enrollment.Enrollment{OrgID: f.org.ID, UserID: f.users[4].ID, FactorConfigID: configs[0].ID, FactorType: configs[0].Type, Value: "x", UpdatedAt: time.Now()}
	if _, err := db.NewInsert().Model(enrolled).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	f.template = &notification.Template{OrgID: f.org.ID, Name: "Reminder", Module: "Reports",
		Mail: &notification.MailTemplate{To: []string{"SELF"}, Subject: "Enrol, %first_name%", Content: "<p>Hi %display_name%</p>"},
		SMS:  &notification.SMSTemplate{To: []string{"SELF"}, Content: "Enrol, %first_name%"}}
	if err := f.store.Templates.Create(ctx, f.template, nil); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *notifyFixture) schedule(t *testing.T) *notification.NotificationSchedule {
	t.Helper()
	sc := &notification.NotificationSchedule{OrgID: f.org.ID, Name: "Nightly", TemplateID: f.template.ID, GroupIDs: f.groups, IsEnabled: true,
		Settings: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "1", Minutes: "30"}}
	if err := f.store.Notifications.CreateSchedule(context.Background(), sc, 0, noSync); err != nil {
		t.Fatal(err)
	}
	return sc
}

func noSync(context.Context, *notification.NotificationSchedule, *notification.NotificationSchedule) error {
	return nil
}

func TestNotificationStore_Schedules(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		f := newNotifyFixture(t, db, "UTC")
		ns := f.store.Notifications

		bad := &notification.NotificationSchedule{OrgID: f.org.ID, Name: "Bad", TemplateID: f.template.ID, GroupIDs: []int64{f.groups[0], 42},
			Settings: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "1", Minutes: "0"}}
		if err := ns.CreateSchedule(ctx, bad, 0, noSync); fieldOf(err) != "groups[1]" {
			t.Errorf("unknown group: %v", err)
		}
		bad.GroupIDs, bad.TemplateID = f.groups, 42
		if err := ns.CreateSchedule(ctx, bad, 0, noSync); fieldOf(err) != "notification_template_id" {
			t.Errorf("unknown template: %v", err)
		}
		// A failing sync (Temporal down) leaves nothing written.
		bad.TemplateID = f.template.ID
		boom := errors.New("temporal is down")
		if err := ns.CreateSchedule(ctx, bad, 0, func(context.Context, *notification.NotificationSchedule, *notification.NotificationSchedule) error {
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("sync error: %v", err)
		}
		if _, err := ns.GetSchedule(ctx, f.org.ID, bad.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("a schedule whose sync failed was kept: %v", err)
		}

		sc := f.schedule(t)
		got, err := ns.GetSchedule(ctx, f.org.ID, sc.ID)
		if err != nil || got.Settings.Minutes != "30" || len(got.GroupIDs) != 2 {
			t.Fatalf("GetSchedule = %+v, %v", got, err)
		}
		var seen *notification.NotificationSchedule
		updated, err := ns.UpdateSchedule(ctx, f.org.ID, sc.ID, 0, func(cur notification.NotificationSchedule) (*notification.NotificationSchedule, error) {
			cur.IsEnabled = false
			cur.GroupIDs = f.groups[:1]
			return &cur, nil
		}, func(_ context.Context, prev, next *notification.NotificationSchedule) error { seen = next; return nil })
		if err != nil || updated.IsEnabled || len(updated.GroupIDs) != 1 || seen == nil || seen.IsEnabled {
			t.Fatalf("UpdateSchedule = %+v, %v", updated, err)
		}
		if err = f.store.Templates.Delete(ctx, f.org.ID, 0, f.template.ID); models.ErrorCode(err) != models.ECONFLICT {
			t.Errorf("deleting a template in use: %v", err)
		}
		refs, err := ns.Refs(ctx, f.org.ID, []notification.NotificationSchedule{*updated})
		if err != nil || refs.TemplateNames[f.template.ID] != "Reminder" || len(refs.ExistingGroups(updated)) != 1 {
			t.Errorf("Refs = %+v, %v", refs, err)
		}
		if err := ns.DeleteSchedule(ctx, f.org.ID, sc.ID, noSync); err != nil {
			t.Fatal(err)
		}
		if err := ns.DeleteSchedule(ctx, f.org.ID, sc.ID, noSync); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("second delete: %v", err)
		}
	})
}

func TestNotificationStore_PrepareRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		f := newNotifyFixture(t, db, "America/New_York")
		ns := f.store.Notifications
		sc := f.schedule(t)
		// 2026-11-01 01:30 happens twice in New York: 05:30Z (EDT) and 06:30Z (EST).
		first := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC)
		run, err := ns.PrepareRun(ctx, notification.PrepareRunInput{OrgID: f.org.ID, ScheduleID: sc.ID, ScheduledAt: first})
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != notification.RunRunning || run.Slot != "2026-11-01T01:30" || run.Template.Name != "Reminder" || run.Template.TimeZone != "America/New_York" {
			t.Errorf("run = %+v", run)
		}
		deliveries, err := ns.Deliveries(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		// ann, bob, dan: mail and SMS each (dan's SMS fails: no number); cat is
		// inactive, eve enrolled; bob is in both groups and counted once.
		var got []string
		for _, d := range deliveries {
			got = append(got, fmt.Sprintf("%d:%s:%s:%s", d.Seq, d.Channel, d.Address, d.State))
		}
		want := []string{"1:mail:ann@example.com:pending", "2:sms:+14155550100:pending", "3:mail:bob@example.com:pending",
			"4:sms:+14155550101:pending", "5:mail:dan@example.com:pending", "6:sms::failed"}
		if fmt.Sprint(got) != fmt.Sprint(want) || run.Total != 6 {
			t.Errorf("deliveries %v (total %d), want %v", got, run.Total, want)
		}
		again, err := ns.PrepareRun(ctx, notification.PrepareRunInput{OrgID: f.org.ID, ScheduleID: sc.ID, ScheduledAt: first})
		if err != nil || again.ID != run.ID {
			t.Errorf("preparing again gave %+v, %v; want the same run", again, err)
		}
		repeat, err := ns.PrepareRun(ctx, notification.PrepareRunInput{OrgID: f.org.ID, ScheduleID: sc.ID, ScheduledAt: first.Add(time.Hour)})
		if err != nil || repeat.Status != notification.RunSkipped || repeat.Total != 0 {
			t.Errorf("the repeated 01:30 gave %+v, %v; want SKIPPED", repeat, err)
		}
		later, err := ns.PrepareRun(ctx, notification.PrepareRunInput{OrgID: f.org.ID, ScheduleID: sc.ID, ScheduledAt: first.Add(time.Hour + time.Minute)})
		if err != nil || later.Status != notification.RunRunning || later.Total != 6 || later.Slot != "2026-11-01T01:31" {
			t.Errorf("a run a minute later gave %+v, %v", later, err)
		}
		if err := ns.DeleteSchedule(ctx, f.org.ID, sc.ID, noSync); err != nil {
			t.Fatal(err)
		}
		if _, err := ns.PrepareRun(ctx, notification.PrepareRunInput{OrgID: f.org.ID, ScheduleID: sc.ID, ScheduledAt: first.Add(48 * time.Hour)}); !errors.Is(err, notification.ErrScheduleGone) {
			t.Errorf("a deleted schedule: %v", err)
		}
	})
}

func TestNotificationStore_DeliveryStates(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		f := newNotifyFixture(t, db, "UTC")
		ns := f.store.Notifications
		sc := f.schedule(t)
		run, err := ns.PrepareRun(ctx, notification.PrepareRunInput{OrgID: f.org.ID, ScheduleID: sc.ID, ScheduledAt: time.Date(2026, 1, 5, 1, 30, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		const a, b = 101, 202 // two attempts of a send step
		claimed, err := ns.Step(ctx, run.ID, a, nil, []int64{1, 2, 3, 4, 6})
		if err != nil || len(claimed) != 4 { // 6 has already failed
			t.Fatalf("claim = %d, %v", len(claimed), err)
		}
		if again, _ := ns.Step(ctx, run.ID, b, nil, []int64{1, 2}); len(again) != 0 {
			t.Errorf("another attempt claimed deliveries held by the first: %v", again)
		}
		out := []notification.DeliveryOutcome{
			{Delivery: &claimed[0], Outcome: notification.DeliverySent},
			{Delivery: &claimed[1], Outcome: notification.DeliveryTemporary, Detail: "451 try later"},
			{Delivery: &claimed[2], Outcome: notification.DeliveryFailed, Detail: "550 no such user"},
		}
		// claimed[3] (seq 4) stays sending: attempt a dies here.
		if _, err = ns.Step(ctx, run.ID, a, out, nil); err != nil {
			t.Fatal(err)
		}
		open, err := ns.OpenDeliveries(ctx, run.ID, 1, 7)
		if err != nil {
			t.Fatal(err)
		}
		var stale []notification.Delivery
		for _, d := range open {
			if d.State == notification.DeliverySending {
				stale = append(stale, d)
			}
		}
		if len(open) != 3 || len(stale) != 1 || stale[0].Seq != 4 {
			t.Fatalf("open %+v", open)
		}
		if err = ns.AbandonClaims(ctx, run.ID, b, stale); err != nil {
			t.Fatal(err)
		}
		// Attempt b retries seq 2 (pending again) until it is out of attempts.
		for i := 2; i <= notification.MaxDeliveryAttempts; i++ {
			c, stepErr := ns.Step(ctx, run.ID, b, nil, []int64{2, 4})
			if stepErr != nil || len(c) != 1 || c[0].Seq != 2 || c[0].Attempts != i {
				t.Fatalf("retry %d: %+v, %v", i, c, stepErr)
			}
			if _, stepErr = ns.Step(ctx, run.ID, b, []notification.DeliveryOutcome{{Delivery: &c[0], Outcome: notification.DeliveryTemporary, Detail: "451"}}, nil); stepErr != nil {
				t.Fatal(stepErr)
			}
		}
		// A late write of the dead attempt changes nothing.
		if _, err = ns.Step(ctx, run.ID, a, []notification.DeliveryOutcome{{Delivery: &claimed[3], Outcome: notification.DeliverySent}}, nil); err != nil {
			t.Fatal(err)
		}
		done, err := ns.FinishRun(ctx, run.ID, "gave up")
		if err != nil {
			t.Fatal(err)
		}
		// sent: 1; failed: 3 (550), 2 (out of attempts), 6 (no number), 5 (never sent: given up); uncertain: 4.
		if done.Status != notification.RunCompleted || done.Sent != 1 || done.Failed != 4 || done.Uncertain != 1 || done.FinishedAt == nil {
			t.Errorf("finished run %+v", done)
		}
		log, err := ns.DeliveryLog(ctx, run.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var seq2 []string
		for _, e := range log {
			if e.Seq == 2 {
				seq2 = append(seq2, fmt.Sprintf("%d:%s", e.Attempt, e.Outcome))
			}
		}
		if fmt.Sprint(seq2) != "[1:temporary 2:temporary 3:temporary 4:temporary 5:temporary]" {
			t.Errorf("log of seq 2: %v", seq2)
		}
		final, _ := ns.Deliveries(ctx, run.ID)
		if final[1].State != notification.DeliveryFailed || final[3].State != notification.DeliveryUncertain {
			t.Errorf("seq 2 %s, seq 4 %s", final[1].State, final[3].State)
		}
	})
}
