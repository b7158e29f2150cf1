package api_test

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/sqldb"
)

// nextTransition returns the local midnight of the next day after from on
// which loc's offset moves back (fallBack) or forward.
func nextTransition(loc *time.Location, from time.Time, fallBack bool) time.Time {
	d := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, loc)
	for range 800 {
		d = d.AddDate(0, 0, 1)
		_, before := d.Zone()
		_, after := d.Add(23 * time.Hour).Zone()
		if (fallBack && after < before) || (!fallBack && after > before) {
			return d
		}
	}
	return time.Time{}
}

// The calendar of a schedule, as the Temporal server computes it across
// daylight saving time changes in the organization's zone: a time the clock
// skips has no run that day; a time it repeats fires twice (and the repeat
// is recorded as skipped: see TestNotificationStore_PrepareRun).
func TestSchedules_DaylightSavingTimeOnTheServer(t *testing.T) {
	db := dbtest.SQLite(t)
	env := apitest.New(t, db, apitest.Options{Temporal: true})
	removeTemporalSchedules(t, env)
	ctx := context.Background()
	const zone = "America/New_York"
	if _, err := env.DB.NewUpdate().Table("organizations").Set("time_zone = ?", zone).Where("id = ?", env.Org.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	loc := mustLoc(t, zone)
	a := newAudience(t, env, env.Org, 1, 0)
	tok := env.Token(env.Org, "svc.quick_enrollment.ALL")
	for _, tc := range []struct {
		hours, minutes string
		day            time.Time // the transition day
		wantOnDay      int       // runs at that local time on that day
	}{
		{"1", "30", nextTransition(loc, time.Now(), true), 2},
		{"2", "30", nextTransition(loc, time.Now(), false), 0},
	} {
		body := a.body("At " + tc.hours + ":" + tc.minutes)
		body["schedule_settings"] = map[string]any{"scheduler_interval": "DAILY", "hours": tc.hours, "minutes": tc.minutes}
		body["is_enabled"] = false
		resp := env.Do(apitest.Request{Method: "POST", Path: schedulesPath, Token: tok, Body: body})
		var created struct{ Data scheduleBody }
		resp.JSON(t, &created)
		if resp.Status != 201 {
			t.Fatalf("POST: %d %s", resp.Status, resp.Body)
		}
		spec := describe(t, env, created.Data.ID).Schedule.Spec
		// A probe with the same calendar, starting the day before the change.
		probe := *spec
		probe.StartAt = tc.day.AddDate(0, 0, -1)
		id := "dst-probe-" + models.FormatID(sqldb.NewID())
		h, err := env.Temporal.ScheduleClient().Create(ctx, client.ScheduleOptions{
			ID: id, Spec: probe, Action: &client.ScheduleWorkflowAction{Workflow: "none", TaskQueue: "nowhere"},
		})
		if err != nil {
			t.Fatal(err)
		}
		d, err := h.Describe(ctx)
		_ = h.Delete(ctx)
		if err != nil {
			t.Fatal(err)
		}
		onDay := 0
		var local []string
		for _, at := range d.Info.NextActionTimes[:min(4, len(d.Info.NextActionTimes))] {
			l := at.In(loc)
			local = append(local, l.Format("Jan 2 15:04 MST"))
			if l.Year() == tc.day.Year() && l.YearDay() == tc.day.YearDay() {
				onDay++
			}
		}
		if onDay != tc.wantOnDay {
			t.Errorf("%s:%s around %s: runs %v; want %d on the day", tc.hours, tc.minutes, tc.day.Format("2006-01-02"), local, tc.wantOnDay)
		}
		t.Logf("%s:%s around %s: %v", tc.hours, tc.minutes, tc.day.Format("2006-01-02"), local)
	}
}
