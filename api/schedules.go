package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/listing"
	"iam/models/notification"
)

// schedulesPath is where notification auto-schedules live.
const schedulesPath = "/protection/quick-enrollment/notification-auto-schedule"

// scheduleBase holds what list items and single schedules share (spec 2.15).
type scheduleBase struct {
	ID                    string                        `json:"id"`
	Name                  string                        `json:"name"`
	Description           string                        `json:"description"`
	NotificationTemplate  refView                       `json:"notification_template"`
	IsEnabled             bool                          `json:"is_enabled"`
	LastRunTime           *time.Time                    `json:"last_run_time"`
	NextRunTime           *time.Time                    `json:"next_run_time"`
	AssociatedGroupsCount string                        `json:"associated_groups_count"`
	ScheduleSettings      notification.ScheduleSettings `json:"schedule_settings"`
}

// scheduleView is one schedule: its groups, and technician as an object.
type scheduleView struct {
	scheduleBase
	Groups     []int64 `json:"groups"`
	Technician refView `json:"technician"`
}

// scheduleItem is a schedule in the list: technician is the name alone.
type scheduleItem struct {
	scheduleBase
	Technician string `json:"technician"`
}

// refView is {id, name} of another resource.
type refView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

func newScheduleBase(sc *notification.NotificationSchedule, refs notification.ScheduleRefs, rt runTimes) scheduleBase {
	return scheduleBase{
		ID: models.FormatID(sc.ID), Name: sc.Name, Description: sc.Description,
		NotificationTemplate: refView{ID: models.FormatID(sc.TemplateID), Name: refs.TemplateNames[sc.TemplateID]},
		IsEnabled:            sc.IsEnabled, LastRunTime: rt.last, NextRunTime: rt.next,
		AssociatedGroupsCount: strconv.Itoa(len(refs.ExistingGroups(sc))),
		ScheduleSettings:      sc.Settings,
	}
}

// scheduleRequest is the body of POST, and of PATCH once merged over the
// current schedule. is_enabled (default true) is the service's addition.
type scheduleRequest struct {
	Name                   string                        `json:"name" validate:"required"`
	Description            string                        `json:"description"`
	Groups                 []int64                       `json:"groups" validate:"required"`
	NotificationTemplateID string                        `json:"notification_template_id" validate:"required"`
	ScheduleSettings       notification.ScheduleSettings `json:"schedule_settings"`
	IsEnabled              *bool                         `json:"is_enabled"`
}

// apply writes the request into sc.
func (r *scheduleRequest) apply(sc *notification.NotificationSchedule) error {
	tid, err := models.ParseID("notification_template_id", r.NotificationTemplateID)
	if err != nil {
		return err
	}
	sc.Name, sc.Description, sc.GroupIDs, sc.TemplateID, sc.Settings = r.Name, r.Description, r.Groups, tid, r.ScheduleSettings
	sc.IsEnabled = r.IsEnabled == nil || *r.IsEnabled
	return nil
}

// scheduleRequestOf is the request form of a stored schedule (the base of
// a PATCH).
func scheduleRequestOf(sc *notification.NotificationSchedule) scheduleRequest {
	enabled := sc.IsEnabled
	return scheduleRequest{Name: sc.Name, Description: sc.Description, Groups: sc.GroupIDs,
		NotificationTemplateID: models.FormatID(sc.TemplateID), ScheduleSettings: sc.Settings, IsEnabled: &enabled}
}

// writeSchedule answers with one schedule.
func (s *Server) writeSchedule(c *gin.Context, status int, sc *notification.NotificationSchedule) error {
	ctx := c.Request.Context()
	refs, err := s.store.Notifications.Refs(ctx, sc.OrgID, []notification.NotificationSchedule{*sc})
	if err != nil {
		return err
	}
	rt := s.scheduleMirror().times(ctx, []int64{sc.ID})[sc.ID]
	c.JSON(status, gin.H{"data": scheduleView{
		scheduleBase: newScheduleBase(sc, refs, rt),
		Groups:       refs.ExistingGroups(sc),
		Technician:   refView{ID: models.FormatID(sc.CreatedBy), Name: refs.UserNames[sc.CreatedBy]},
	}})
	return nil
}

// listSchedules: GET .../notification-auto-schedule (offset paging; filter
// on name, description, is_enabled, notification_template_id, id).
func (s *Server) listSchedules(c *gin.Context) error {
	ctx := c.Request.Context()
	org := principal(c).OrgID
	params, err := listing.Parse(c.Request.URL.Query(), notification.NotificationScheduleListing)
	if err != nil {
		return err
	}
	list, meta, err := s.store.Notifications.ListSchedules(ctx, org, params)
	if err != nil {
		return err
	}
	refs, err := s.store.Notifications.Refs(ctx, org, list)
	if err != nil {
		return err
	}
	ids := make([]int64, len(list))
	for i := range list {
		ids[i] = list[i].ID
	}
	times := s.scheduleMirror().times(ctx, ids)
	items := make([]scheduleItem, len(list))
	for i := range list {
		sc := &list[i]
		items[i] = scheduleItem{scheduleBase: newScheduleBase(sc, refs, times[sc.ID]), Technician: refs.UserNames[sc.CreatedBy]}
	}
	writeList(c, items, params.Fields, meta)
	return nil
}

// createSchedule: POST .../notification-auto-schedule, 201 with {data}. The
// row and its Temporal Schedule are written together or not at all.
func (s *Server) createSchedule(c *gin.Context) error {
	ctx := c.Request.Context()
	p := principal(c)
	var req scheduleRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	sc := &notification.NotificationSchedule{OrgID: p.OrgID, CreatedBy: p.UserID}
	if err := req.apply(sc); err != nil {
		return err
	}
	m := s.scheduleMirror()
	if m == nil {
		return errEngineDown
	}
	err := m.write(ctx, p.OrgID, func(sync notification.SyncFunc) error {
		return s.store.Notifications.CreateSchedule(ctx, sc, p.UserID, sync)
	})
	if err != nil {
		return err
	}
	return s.writeSchedule(c, http.StatusCreated, sc)
}

// getSchedule: GET .../notification-auto-schedule/{schedule_id}, {data}.
func (s *Server) getSchedule(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c, "schedule_id", notification.ErrScheduleNotFound)
	if err != nil {
		return err
	}
	sc, err := s.store.Notifications.GetSchedule(ctx, principal(c).OrgID, id)
	if err != nil {
		return err
	}
	return s.writeSchedule(c, http.StatusOK, sc)
}

// updateSchedule: PATCH .../{schedule_id}: a JSON merge patch (RFC 7396)
// over the schedule in request form (name, description, groups,
// notification_template_id, schedule_settings, is_enabled), checked as a
// whole like a create.
func (s *Server) updateSchedule(c *gin.Context) error {
	patch, err := decodePatch(c)
	if err != nil {
		return err
	}
	return s.changeSchedule(c, func(cur notification.NotificationSchedule) (*notification.NotificationSchedule, error) {
		req, err := mergeSchedule(cur, patch)
		if err != nil {
			return nil, err
		}
		if err := req.apply(&cur); err != nil {
			return nil, err
		}
		return &cur, nil
	})
}

// mergeSchedule applies patch to the request form of cur.
func mergeSchedule(cur notification.NotificationSchedule, patch []byte) (*scheduleRequest, error) {
	var req scheduleRequest
	if err := mergeRequest(scheduleRequestOf(&cur), patch, nil, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// pauseSchedule: POST .../{schedule_id}/pause: no runs until resumed.
func (s *Server) pauseSchedule(c *gin.Context) error { return s.setScheduleEnabled(c, false) }

// resumeSchedule: POST .../{schedule_id}/resume.
func (s *Server) resumeSchedule(c *gin.Context) error { return s.setScheduleEnabled(c, true) }

func (s *Server) setScheduleEnabled(c *gin.Context, enabled bool) error {
	return s.changeSchedule(c, func(cur notification.NotificationSchedule) (*notification.NotificationSchedule, error) {
		cur.IsEnabled = enabled
		return &cur, nil
	})
}

// changeSchedule writes change to the schedule of the path and its
// Temporal Schedule together, and answers with the result.
func (s *Server) changeSchedule(c *gin.Context, change func(notification.NotificationSchedule) (*notification.NotificationSchedule, error)) error {
	ctx := c.Request.Context()
	p := principal(c)
	id, err := pathID(c, "schedule_id", notification.ErrScheduleNotFound)
	if err != nil {
		return err
	}
	m := s.scheduleMirror()
	if m == nil {
		return errEngineDown
	}
	var out *notification.NotificationSchedule
	if err := m.write(ctx, p.OrgID, func(sync notification.SyncFunc) error {
		var err error
		out, err = s.store.Notifications.UpdateSchedule(ctx, p.OrgID, id, p.UserID, change, sync)
		return err
	}); err != nil {
		return err
	}
	return s.writeSchedule(c, http.StatusOK, out)
}

// deleteSchedule: DELETE .../{schedule_id}, 204. Its Temporal Schedule goes
// with it; past runs and their delivery log stay.
func (s *Server) deleteSchedule(c *gin.Context) error {
	ctx := c.Request.Context()
	p := principal(c)
	id, err := pathID(c, "schedule_id", notification.ErrScheduleNotFound)
	if err != nil {
		return err
	}
	m := s.scheduleMirror()
	if m == nil {
		return errEngineDown
	}
	err = m.write(ctx, p.OrgID, func(sync notification.SyncFunc) error {
		return s.store.Notifications.DeleteSchedule(ctx, p.OrgID, id, sync)
	})
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// runSchedule: POST .../{schedule_id}/run-now, 202: a run starts now (after
// the one in progress, if any), paused or not. The request's
// schedule.run_requested event commits only when the trigger was taken
// (notification.NotificationStore.RequestRun).
func (s *Server) runSchedule(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c, "schedule_id", notification.ErrScheduleNotFound)
	if err != nil {
		return err
	}
	m := s.scheduleMirror()
	if m != nil {
		// A schedule missing in Temporal is made again before its trigger.
		if err = m.loadTimeZone(ctx, principal(c).OrgID); err != nil {
			return err
		}
	}
	sc, err := s.store.Notifications.RequestRun(ctx, principal(c).OrgID, id, func(ctx context.Context, sc *notification.NotificationSchedule) error {
		if m == nil {
			return errEngineDown
		}
		return m.trigger(context.WithoutCancel(ctx), sc)
	})
	if err != nil {
		return err
	}
	return s.writeSchedule(c, http.StatusAccepted, sc)
}
