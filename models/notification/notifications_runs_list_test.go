package notification_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/listing"
	"iam/models/notification"
	"iam/models/sqldb"
)

func listParams(t *testing.T, s *listing.Schema, query string) listing.Params {
	t.Helper()
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	p, err := listing.Parse(q, s)
	if err != nil {
		t.Fatalf("parse %q: %v", query, err)
	}
	return p
}

// A schedule's runs and a run's deliveries are listed with their counts,
// filtered, sorted and paged, and only within the organization and the
// schedule.
func TestNotificationStore_ListRunsAndDeliveries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		f := newNotifyFixture(t, db, "UTC")
		ns := f.store.Notifications
		sc := f.schedule(t)
		first := time.Date(2026, 3, 2, 1, 30, 0, 0, time.UTC)
		done, err := ns.PrepareRun(ctx, notification.PrepareRunInput{OrgID: f.org.ID, ScheduleID: sc.ID, ScheduledAt: first})
		if err != nil {
			t.Fatal(err)
		}
		// Delivery 1 (ann's mail) is sent; the rest are given up.
		claim := sqldb.NewID()
		claimed, err := ns.Step(ctx, done.ID, claim, nil, []int64{1})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v %v", claimed, err)
		}
		if _, err = ns.Step(ctx, done.ID, claim, []notification.DeliveryOutcome{{Delivery: &claimed[0], Outcome: notification.DeliverySent}}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err = ns.FinishRun(ctx, done.ID, "gave up"); err != nil {
			t.Fatal(err)
		}
		running, err := ns.PrepareRun(ctx, notification.PrepareRunInput{OrgID: f.org.ID, ScheduleID: sc.ID, ScheduledAt: first.Add(24 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}

		runs, meta, err := ns.ListRuns(ctx, f.org.ID, sc.ID, listParams(t, notification.NotificationRunListing, ""))
		if err != nil {
			t.Fatal(err)
		}
		om, _ := meta.(*listing.OffsetMeta)
		if len(runs) != 2 || runs[0].ID != running.ID || runs[1].ID != done.ID || om == nil || om.Total != 2 {
			t.Fatalf("runs %+v meta %+v; want the running one first", runs, meta)
		}
		r := runs[1]
		// ann, bob, dan are messaged (mail and SMS); cat is inactive and eve
		// enrolled: skipped.
		if r.Status != notification.RunCompleted || r.Recipients != 3 || r.Skipped != 2 || r.Total != 6 || r.Sent != 1 || r.Failed != 5 || r.FinishedAt == nil {
			t.Errorf("finished run %+v", r)
		}
		runs, _, err = ns.ListRuns(ctx, f.org.ID, sc.ID, listParams(t, notification.NotificationRunListing, `filter=status eq "RUNNING"`))
		if err != nil || len(runs) != 1 || runs[0].ID != running.ID {
			t.Errorf("filter on status: %+v, %v", runs, err)
		}
		runs, _, err = ns.ListRuns(ctx, f.org.ID, sc.ID, listParams(t, notification.NotificationRunListing, "sort=scheduled_time&limit=1&from=1"))
		if err != nil || len(runs) != 1 || runs[0].ID != running.ID {
			t.Errorf("sorted oldest first, second page: %+v, %v", runs, err)
		}

		ds, meta, err := ns.ListDeliveries(ctx, f.org.ID, sc.ID, done.ID, listParams(t, notification.NotificationDeliveryListing, `filter=channel eq "sms"`))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range ds {
			got = append(got, fmt.Sprintf("%d:%s:%s:%s:%d", d.Seq, d.Kind, d.Channel, d.State, d.Attempts))
		}
		if fmt.Sprint(got) != "[2:member:sms:failed:0 4:member:sms:failed:0 6:member:sms:failed:0]" || meta.(*listing.OffsetMeta).Total != 3 {
			t.Errorf("sms deliveries %v (meta %+v)", got, meta)
		}
		ds, _, err = ns.ListDeliveries(ctx, f.org.ID, sc.ID, done.ID, listParams(t, notification.NotificationDeliveryListing, `filter=status eq "sent" and channel eq "mail"`))
		if err != nil || len(ds) != 1 || ds[0].Seq != 1 || ds[0].UserID != f.users[0].ID || ds[0].Attempts != 1 {
			t.Errorf("sent mail: %+v, %v", ds, err)
		}

		// Another organization sees neither; another schedule's id does not
		// reach this schedule's run.
		other := &identity.Organization{Name: "Other", TimeZone: "UTC"}
		if _, _, err := f.store.Orgs.CreateOrganization(ctx, other, identity.FirstAdmin{Email: "admin@other.example.com"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ns.ListRuns(ctx, other.ID, sc.ID, listParams(t, notification.NotificationRunListing, "")); !errors.Is(err, notification.ErrScheduleNotFound) {
			t.Errorf("runs of another organization's schedule: %v", err)
		}
		if _, _, err := ns.ListDeliveries(ctx, other.ID, sc.ID, done.ID, listParams(t, notification.NotificationDeliveryListing, "")); !errors.Is(err, notification.ErrScheduleNotFound) {
			t.Errorf("deliveries of another organization's schedule: %v", err)
		}
		sc2 := &notification.NotificationSchedule{OrgID: f.org.ID, Name: "Weekly", TemplateID: f.template.ID, GroupIDs: f.groups,
			Settings: notification.ScheduleSettings{SchedulerInterval: "WEEKLY", Hours: "1", Minutes: "30", DayOfWeek: "1"}}
		if err := ns.CreateSchedule(ctx, sc2, 0, noSync); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ns.ListDeliveries(ctx, f.org.ID, sc2.ID, done.ID, listParams(t, notification.NotificationDeliveryListing, "")); !errors.Is(err, notification.ErrRunNotFound) {
			t.Errorf("a run under another schedule: %v", err)
		}
	})
}
