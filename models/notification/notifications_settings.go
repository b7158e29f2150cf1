package notification

import (
	"iam/models"
	"strconv"
	"strings"
)

// Schedule intervals (spec 2.15 scheduler_interval).
const (
	IntervalDaily   = "DAILY"
	IntervalWeekly  = "WEEKLY"
	IntervalMonthly = "MONTHLY"
)

// ScheduleSettings says when a notification schedule runs, in the
// organization's time zone (spec 2.15). Every value is a string of digits:
// hours 0-23 and minutes 0-59 always; day_of_week 0-6 (0 is Sunday) for
// WEEKLY; day_of_month 1-31 for MONTHLY, with month_of_year 1-12 optional
// (given, the run happens in that month only: once a year). Fields the
// interval does not use are dropped.
type ScheduleSettings struct {
	SchedulerInterval string `json:"scheduler_interval"`
	Hours             string `json:"hours"`
	Minutes           string `json:"minutes"`
	DayOfWeek         string `json:"day_of_week,omitempty"`
	DayOfMonth        string `json:"day_of_month,omitempty"`
	MonthOfYear       string `json:"month_of_year,omitempty"`
}

// ScheduleTime is ScheduleSettings read as numbers; a field the interval
// does not use is -1.
type ScheduleTime struct {
	Interval                                   string
	Hour, Minute, DayOfWeek, DayOfMonth, Month int
}

// Check validates s, writes it in canonical form (the interval in upper
// case, numbers without leading zeros, unused fields dropped) and returns
// its numbers. Errors name the field under prefix (schedule_settings).
func (s *ScheduleSettings) Check(prefix string) (ScheduleTime, error) {
	var p models.Problems
	t := ScheduleTime{DayOfWeek: -1, DayOfMonth: -1, Month: -1}
	num := func(name string, v *string, lo, hi int, required bool) int {
		field := prefix + "." + name
		raw := strings.TrimSpace(*v)
		if raw == "" {
			if required {
				p.Add(field, "is required")
			}
			*v = ""
			return -1
		}
		n, err := strconv.Atoi(raw)
		if err != nil || strings.ContainsAny(raw, "+-") || len(raw) > 2 || n < lo || n > hi {
			p.Add(field, "must be a number from %d to %d, written in digits", lo, hi)
			return -1
		}
		*v = strconv.Itoa(n)
		return n
	}
	t.Interval = strings.ToUpper(strings.TrimSpace(s.SchedulerInterval))
	switch t.Interval {
	case IntervalDaily, IntervalWeekly, IntervalMonthly:
		s.SchedulerInterval = t.Interval
	case "":
		p.Add(prefix+".scheduler_interval", "is required")
	default:
		p.Add(prefix+".scheduler_interval", "must be one of: DAILY, WEEKLY, MONTHLY")
	}
	t.Hour = num("hours", &s.Hours, 0, 23, true)
	t.Minute = num("minutes", &s.Minutes, 0, 59, true)
	switch t.Interval {
	case IntervalWeekly:
		t.DayOfWeek = num("day_of_week", &s.DayOfWeek, 0, 6, true)
		s.DayOfMonth, s.MonthOfYear = "", ""
	case IntervalMonthly:
		t.DayOfMonth = num("day_of_month", &s.DayOfMonth, 1, 31, true)
		t.Month = num("month_of_year", &s.MonthOfYear, 1, 12, false)
		s.DayOfWeek = ""
	default:
		s.DayOfWeek, s.DayOfMonth, s.MonthOfYear = "", "", ""
	}
	return t, p.Result()
}
