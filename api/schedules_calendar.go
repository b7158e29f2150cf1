package api

import (
	"fmt"

	"go.temporal.io/sdk/client"

	"iam/models/notification"
)

// scheduleSpec is the Temporal calendar of a schedule's settings, in the
// organization's time zone tz: second 0 of the minute and hour given, on
// every day (DAILY), on day_of_week (WEEKLY, 0 is Sunday, as Temporal
// counts), or on day_of_month of every month or of month_of_year only
// (MONTHLY). A month without day_of_month (the 31st of April) has no run.
//
// Daylight saving time: Temporal matches the wall clock of tz. A time the
// clock skips (02:30 on the spring-forward night) has no run that day; a
// time it repeats (01:30 on the fall-back night) fires twice, and the second
// run is written SKIPPED by models.PrepareRun (one run per local minute), so
// members are notified once.
func scheduleSpec(t notification.ScheduleTime, tz string) client.ScheduleSpec {
	one := func(v int) []client.ScheduleRange { return []client.ScheduleRange{{Start: v}} }
	all := func(lo, hi int) []client.ScheduleRange { return []client.ScheduleRange{{Start: lo, End: hi}} }
	cal := client.ScheduleCalendarSpec{
		Second:     one(0),
		Minute:     one(t.Minute),
		Hour:       one(t.Hour),
		DayOfMonth: all(1, 31),
		Month:      all(1, 12),
		DayOfWeek:  all(0, 6),
		Comment:    fmt.Sprintf("%s at %02d:%02d", t.Interval, t.Hour, t.Minute),
	}
	switch t.Interval {
	case notification.IntervalWeekly:
		cal.DayOfWeek = one(t.DayOfWeek)
	case notification.IntervalMonthly:
		cal.DayOfMonth = one(t.DayOfMonth)
		if t.Month > 0 {
			cal.Month = one(t.Month)
		}
	}
	return client.ScheduleSpec{Calendars: []client.ScheduleCalendarSpec{cal}, TimeZoneName: tz}
}
