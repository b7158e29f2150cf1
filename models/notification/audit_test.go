package notification_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/modeltest"
	"iam/models/notification"
)

// wantOnly checks that ev has the one target typ, id, name.
func wantOnly(t *testing.T, ev models.EventRecord, typ string, id int64, name string) {
	t.Helper()
	if len(ev.Targets) != 1 || ev.Targets[0].Type != typ || ev.Targets[0].ID != models.FormatID(id) || ev.Targets[0].DisplayName != name {
		t.Errorf("%s targets %+v, want %s %d %q", ev.EventType, ev.Targets, typ, id, name)
	}
}

func TestTemplateStore_AuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		f := newNotifyFixture(t, db, "UTC")
		ts := f.store.Templates
		tpl := mailTemplate("Welcome")
		tpl.OrgID, tpl.IsDefault = f.org.ID, true
		files := []notification.NewTemplateFile{{Name: "guide.pdf", ContentType: "application/pdf", Data: []byte("%PDF-secret-bytes"), Field: "mail.attachments[0]"}}
		if err := ts.Create(ctx, tpl, files); err != nil {
			t.Fatal(err)
		}
		created := modeltest.WantEvents(t, db, f.org.ID, audit.TemplateCreated, 2) // the fixture's, then this one
		wantOnly(t, created[1], "template", tpl.ID, "Welcome")
		if created[1].Actor.ID != "7" || created[1].RequestID != "req-1" {
			t.Errorf("origin of %+v", created[1])
		}
		// Refused: a taken name, an invalid change.
		dup := mailTemplate("welcome")
		dup.OrgID = f.org.ID
		if err := ts.Create(ctx, dup, nil); models.ErrorCode(err) != models.ECONFLICT {
			t.Fatalf("duplicate: %v", err)
		}
		_, err := ts.Update(ctx, f.org.ID, 0, tpl.ID, func(cur *notification.Template) (*notification.Template, []notification.NewTemplateFile, error) {
			cur.Name = ""
			return cur, nil, nil
		})
		if models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("invalid update: %v", err)
		}
		modeltest.WantEvents(t, db, f.org.ID, audit.TemplateCreated, 2)
		modeltest.WantEvents(t, db, f.org.ID, audit.TemplateUpdated, 0)

		// Update: the fields changed; the new file by id and name, never
		// its bytes.
		_, err = ts.Update(ctx, f.org.ID, 0, tpl.ID, func(cur *notification.Template) (*notification.Template, []notification.NewTemplateFile, error) {
			cur.Description = "for new staff"
			return cur, []notification.NewTemplateFile{{Name: "map.png", ContentType: "image/png", Data: []byte("PNG-bytes"), Field: "mail.attachments[1]"}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ev := modeltest.WantEvents(t, db, f.org.ID, audit.TemplateUpdated, 1)[0]
		wantOnly(t, ev, "template", tpl.ID, "Welcome")
		got := modeltest.ChangesOf(t, ev.Targets[0])
		if got["description"] != `["","for new staff"]` || !strings.Contains(got["mail"], "map.png") || len(got) != 2 {
			t.Errorf("changes %v", got)
		}
		body, _ := json.Marshal(modeltest.Events(t, db, f.org.ID))
		if strings.Contains(string(body), "bytes") {
			t.Errorf("file bytes in an event: %s", body)
		}

		// A new default of the module: the old default's flag goes, with
		// its own event.
		next := mailTemplate("Welcome 2")
		next.OrgID, next.IsDefault = f.org.ID, true
		if err = ts.Create(ctx, next, nil); err != nil {
			t.Fatal(err)
		}
		ev = modeltest.WantEvents(t, db, f.org.ID, audit.TemplateUpdated, 2)[1]
		wantOnly(t, ev, "template", tpl.ID, "Welcome")
		if got := modeltest.ChangesOf(t, ev.Targets[0]); fmt.Sprint(got) != `map[is_default:[true,false]]` {
			t.Errorf("default cleared: %v", got)
		}

		// Delete: refused while a schedule uses it.
		sc := &notification.NotificationSchedule{OrgID: f.org.ID, Name: "Weekly", TemplateID: tpl.ID, GroupIDs: f.groups[:1], IsEnabled: true,
			Settings: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "1", Minutes: "0"}}
		if err = f.store.Notifications.CreateSchedule(ctx, sc, 0, noSync); err != nil {
			t.Fatal(err)
		}
		if err = ts.Delete(ctx, f.org.ID, 0, tpl.ID); models.ErrorCode(err) != models.ECONFLICT {
			t.Fatalf("delete in use: %v", err)
		}
		modeltest.WantEvents(t, db, f.org.ID, audit.TemplateDeleted, 0)
		if err = ts.Delete(ctx, f.org.ID, 0, next.ID); err != nil {
			t.Fatal(err)
		}
		wantOnly(t, modeltest.WantEvents(t, db, f.org.ID, audit.TemplateDeleted, 1)[0], "template", next.ID, "Welcome 2")
	})
}

func TestNotificationStore_ScheduleAuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		f := newNotifyFixture(t, db, "UTC")
		ns := f.store.Notifications
		sc := &notification.NotificationSchedule{OrgID: f.org.ID, Name: "Nightly", TemplateID: f.template.ID, GroupIDs: f.groups, IsEnabled: true,
			Settings: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "1", Minutes: "30"}}
		if err := ns.CreateSchedule(ctx, sc, 0, noSync); err != nil {
			t.Fatal(err)
		}
		wantOnly(t, modeltest.WantEvents(t, db, f.org.ID, audit.ScheduleCreated, 1)[0], "schedule", sc.ID, "Nightly")
		// Refused: by the check, or by the mirror (sync) failing.
		bad := *sc
		bad.ID, bad.Name, bad.GroupIDs = 0, "Bad", []int64{42}
		if err := ns.CreateSchedule(ctx, &bad, 0, noSync); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("bad group: %v", err)
		}
		failing := func(context.Context, *notification.NotificationSchedule, *notification.NotificationSchedule) error {
			return models.Errorf(models.EUNAVAILABLE, "the workflow engine is down")
		}
		other := *sc
		other.ID, other.Name = 0, "Other"
		if err := ns.CreateSchedule(ctx, &other, 0, failing); err == nil {
			t.Fatal("created with its mirror failing")
		}
		pause := func(cur notification.NotificationSchedule) (*notification.NotificationSchedule, error) {
			cur.IsEnabled = false
			return &cur, nil
		}
		if _, err := ns.UpdateSchedule(ctx, f.org.ID, sc.ID, 0, pause, failing); err == nil {
			t.Fatal("paused with its mirror failing")
		}
		modeltest.WantEvents(t, db, f.org.ID, audit.ScheduleCreated, 1)
		modeltest.WantEvents(t, db, f.org.ID, audit.SchedulePaused, 0)

		// Pause and resume: their own events; other fields: updated.
		if _, err := ns.UpdateSchedule(ctx, f.org.ID, sc.ID, 0, pause, noSync); err != nil {
			t.Fatal(err)
		}
		ev := modeltest.WantEvents(t, db, f.org.ID, audit.SchedulePaused, 1)[0]
		wantOnly(t, ev, "schedule", sc.ID, "Nightly")
		if got := fmt.Sprint(modeltest.ChangesOf(t, ev.Targets[0])); got != `map[is_enabled:[true,false]]` {
			t.Errorf("paused changes %s", got)
		}
		modeltest.WantEvents(t, db, f.org.ID, audit.ScheduleUpdated, 0)
		_, err := ns.UpdateSchedule(ctx, f.org.ID, sc.ID, 0, func(cur notification.NotificationSchedule) (*notification.NotificationSchedule, error) {
			cur.IsEnabled, cur.Name, cur.GroupIDs = true, "Daily", f.groups[:1]
			cur.Settings.Hours = "2"
			return &cur, nil
		}, noSync)
		if err != nil {
			t.Fatal(err)
		}
		wantOnly(t, modeltest.WantEvents(t, db, f.org.ID, audit.ScheduleResumed, 1)[0], "schedule", sc.ID, "Daily")
		ev = modeltest.WantEvents(t, db, f.org.ID, audit.ScheduleUpdated, 1)[0]
		wantOnly(t, ev, "schedule", sc.ID, "Daily")
		got := modeltest.ChangesOf(t, ev.Targets[0])
		want := map[string]string{"name": `["Nightly","Daily"]`,
			"groups":            fmt.Sprintf(`[["%d","%d"],["%d"]]`, f.groups[0], f.groups[1], f.groups[0]),
			"schedule_settings": `[{"hours":"1","minutes":"30","scheduler_interval":"DAILY"},{"hours":"2","minutes":"30","scheduler_interval":"DAILY"}]`}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("updated changes %v, want %v", got, want)
		}

		if err := ns.DeleteSchedule(ctx, f.org.ID, sc.ID, failing); err == nil {
			t.Fatal("deleted with its mirror failing")
		}
		modeltest.WantEvents(t, db, f.org.ID, audit.ScheduleDeleted, 0)
		if err := ns.DeleteSchedule(ctx, f.org.ID, sc.ID, noSync); err != nil {
			t.Fatal(err)
		}
		wantOnly(t, modeltest.WantEvents(t, db, f.org.ID, audit.ScheduleDeleted, 1)[0], "schedule", sc.ID, "Daily")
	})
}

// RequestRun records schedule.run_requested, with the request's origin,
// only when its trigger is taken: a trigger that fails leaves no event,
// and an unknown schedule neither triggers nor records.
func TestNotificationStore_RequestRunRecordsItsEvent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		f := newNotifyFixture(t, db, "UTC")
		ns := f.store.Notifications
		sc := &notification.NotificationSchedule{OrgID: f.org.ID, Name: "Nightly", TemplateID: f.template.ID, GroupIDs: f.groups, IsEnabled: true,
			Settings: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "1", Minutes: "30"}}
		if err := ns.CreateSchedule(ctx, sc, 0, noSync); err != nil {
			t.Fatal(err)
		}
		triggered := 0
		trigger := func(_ context.Context, got *notification.NotificationSchedule) error {
			if got.ID != sc.ID {
				t.Errorf("triggered schedule %d, want %d", got.ID, sc.ID)
			}
			triggered++
			return nil
		}
		failing := func(context.Context, *notification.NotificationSchedule) error {
			triggered++
			return models.Errorf(models.EUNAVAILABLE, "the workflow engine is down")
		}

		if _, err := ns.RequestRun(ctx, f.org.ID, sc.ID, failing); models.ErrorCode(err) != models.EUNAVAILABLE || triggered != 1 {
			t.Fatalf("with the trigger failing: %v (%d triggers)", err, triggered)
		}
		modeltest.WantEvents(t, db, f.org.ID, audit.ScheduleRunRequested, 0)
		if _, err := ns.RequestRun(ctx, f.org.ID, 42, trigger); models.ErrorCode(err) != models.ENOTFOUND || triggered != 1 {
			t.Fatalf("an unknown schedule: %v (%d triggers)", err, triggered)
		}
		if _, err := ns.RequestRun(ctx, f.org.ID+1, sc.ID, trigger); models.ErrorCode(err) != models.ENOTFOUND || triggered != 1 {
			t.Fatalf("another organization's schedule: %v (%d triggers)", err, triggered)
		}
		modeltest.WantEvents(t, db, f.org.ID, audit.ScheduleRunRequested, 0)

		got, err := ns.RequestRun(ctx, f.org.ID, sc.ID, trigger)
		if err != nil || got.ID != sc.ID || triggered != 2 {
			t.Fatalf("RequestRun: %+v, %v (%d triggers)", got, err, triggered)
		}
		ev := modeltest.OneEvent(t, db, f.org.ID, audit.ScheduleRunRequested)
		wantOnly(t, ev, "schedule", sc.ID, "Nightly")
		if ev.Actor.ID != "7" || ev.RequestID != "req-1" || ev.Outcome.Result != models.ResultSuccess || len(ev.Targets[0].Changes) != 0 {
			t.Errorf("run_requested event %+v", ev)
		}
	})
}
