package api

import (
	"reflect"
	"testing"

	"go.temporal.io/sdk/client"

	"iam/models/notification"
)

func TestScheduleSpec_MapsSettingsToTheCalendar(t *testing.T) {
	r := func(lo, hi int) []client.ScheduleRange { return []client.ScheduleRange{{Start: lo, End: hi}} }
	one := func(v int) []client.ScheduleRange { return []client.ScheduleRange{{Start: v}} }
	for _, tc := range []struct {
		name     string
		settings notification.ScheduleSettings
		want     client.ScheduleCalendarSpec
	}{
		{"daily", notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "9", Minutes: "30"},
			client.ScheduleCalendarSpec{Second: one(0), Minute: one(30), Hour: one(9), DayOfMonth: r(1, 31), Month: r(1, 12), DayOfWeek: r(0, 6)}},
		{"daily ignores days", notification.ScheduleSettings{SchedulerInterval: "daily", Hours: "00", Minutes: "0", DayOfWeek: "3", DayOfMonth: "4"},
			client.ScheduleCalendarSpec{Second: one(0), Minute: one(0), Hour: one(0), DayOfMonth: r(1, 31), Month: r(1, 12), DayOfWeek: r(0, 6)}},
		{"weekly on Sunday", notification.ScheduleSettings{SchedulerInterval: "WEEKLY", Hours: "23", Minutes: "59", DayOfWeek: "0"},
			client.ScheduleCalendarSpec{Second: one(0), Minute: one(59), Hour: one(23), DayOfMonth: r(1, 31), Month: r(1, 12), DayOfWeek: one(0)}},
		{"weekly on Saturday", notification.ScheduleSettings{SchedulerInterval: "WEEKLY", Hours: "6", Minutes: "15", DayOfWeek: "6"},
			client.ScheduleCalendarSpec{Second: one(0), Minute: one(15), Hour: one(6), DayOfMonth: r(1, 31), Month: r(1, 12), DayOfWeek: one(6)}},
		{"monthly", notification.ScheduleSettings{SchedulerInterval: "MONTHLY", Hours: "8", Minutes: "0", DayOfMonth: "31"},
			client.ScheduleCalendarSpec{Second: one(0), Minute: one(0), Hour: one(8), DayOfMonth: one(31), Month: r(1, 12), DayOfWeek: r(0, 6)}},
		{"monthly in one month", notification.ScheduleSettings{SchedulerInterval: "MONTHLY", Hours: "8", Minutes: "0", DayOfMonth: "1", MonthOfYear: "12"},
			client.ScheduleCalendarSpec{Second: one(0), Minute: one(0), Hour: one(8), DayOfMonth: one(1), Month: one(12), DayOfWeek: r(0, 6)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.settings
			st, err := s.Check("schedule_settings")
			if err != nil {
				t.Fatal(err)
			}
			spec := scheduleSpec(st, "Europe/Berlin")
			if spec.TimeZoneName != "Europe/Berlin" || len(spec.Calendars) != 1 || len(spec.Intervals)+len(spec.CronExpressions) != 0 {
				t.Fatalf("spec %+v", spec)
			}
			got := spec.Calendars[0]
			got.Comment = ""
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("calendar\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
