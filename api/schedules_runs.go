package api

import (
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/listing"
	"iam/models/notification"
)

// runView is one run of a notification schedule: when it was due, when it
// started and ended, and what came of its deliveries.
type runView struct {
	ID            string         `json:"id"`
	Status        string         `json:"status"`
	ScheduledTime time.Time      `json:"scheduled_time"`
	StartTime     time.Time      `json:"start_time"`
	EndTime       *time.Time     `json:"end_time"`
	Recipients    int64          `json:"recipients"`
	Deliveries    int64          `json:"deliveries"`
	Sent          int64          `json:"sent"`
	Failed        int64          `json:"failed"`
	Uncertain     int64          `json:"uncertain"`
	Skipped       int64          `json:"skipped"`
	Message       string         `json:"message"`
	Template      runTemplateRef `json:"template"`
}

type runTemplateRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

func newRunView(r *notification.NotificationRun) runView {
	return runView{
		ID: models.FormatID(r.ID), Status: r.Status,
		ScheduledTime: r.ScheduledAt.UTC(), StartTime: r.CreatedAt.UTC(), EndTime: utcPtr(r.FinishedAt),
		Recipients: r.Recipients, Deliveries: r.Total, Sent: r.Sent, Failed: r.Failed, Uncertain: r.Uncertain, Skipped: r.Skipped,
		Message:  r.Message,
		Template: runTemplateRef{ID: models.FormatID(r.Template.ID), Name: r.Template.Name},
	}
}

// deliveryView is one message of a run: to a member (user_id and their
// display name) or a summary to an address of the template.
type deliveryView struct {
	Seq             int64     `json:"seq"`
	Kind            string    `json:"kind"`
	UserID          *string   `json:"user_id"`
	UserDisplayName *string   `json:"user_display_name"`
	Channel         string    `json:"channel"`
	Address         string    `json:"address"`
	Status          string    `json:"status"`
	Attempts        int       `json:"attempts"`
	LastError       string    `json:"last_error"`
	Uncertain       bool      `json:"uncertain"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// listScheduleRuns: GET …/notification-auto-schedule/{schedule_id}/runs,
// newest first (offset paging; filter and sort on status, times, counts).
func (s *Server) listScheduleRuns(c *gin.Context) error {
	id, err := pathID(c, "schedule_id", notification.ErrScheduleNotFound)
	if err != nil {
		return err
	}
	params, err := listing.Parse(c.Request.URL.Query(), notification.NotificationRunListing)
	if err != nil {
		return err
	}
	runs, meta, err := s.store.Notifications.ListRuns(c.Request.Context(), principal(c).OrgID, id, params)
	if err != nil {
		return err
	}
	writeList(c, viewsOf(runs, newRunView), params.Fields, meta)
	return nil
}

// listRunDeliveries: GET …/{schedule_id}/runs/{run_id}/deliveries, in
// delivery order (offset paging; filter on status, channel, kind …). A user
// deleted since the run has no display name.
func (s *Server) listRunDeliveries(c *gin.Context) error {
	id, err := pathID(c, "schedule_id", notification.ErrScheduleNotFound)
	if err != nil {
		return err
	}
	runID, err := pathID(c, "run_id", notification.ErrRunNotFound)
	if err != nil {
		return err
	}
	params, err := listing.Parse(c.Request.URL.Query(), notification.NotificationDeliveryListing)
	if err != nil {
		return err
	}
	ctx, org := c.Request.Context(), principal(c).OrgID
	deliveries, meta, err := s.store.Notifications.ListDeliveries(ctx, org, id, runID, params)
	if err != nil {
		return err
	}
	var userIDs []int64
	for _, d := range deliveries {
		if d.UserID != 0 {
			userIDs = append(userIDs, d.UserID)
		}
	}
	users, err := s.store.Notifications.Recipients(ctx, org, userIDs)
	if err != nil {
		return err
	}
	names := make(map[int64]string, len(users))
	for i := range users {
		names[users[i].ID] = users[i].Name()
	}
	views := make([]deliveryView, len(deliveries))
	for i, d := range deliveries {
		v := deliveryView{
			Seq: d.Seq, Kind: d.Kind, Channel: d.Channel, Address: d.Address, Status: d.State,
			Attempts: d.Attempts, LastError: d.LastError, Uncertain: d.State == notification.DeliveryUncertain, UpdatedAt: d.UpdatedAt.UTC(),
		}
		if d.UserID != 0 {
			uid := models.FormatID(d.UserID)
			v.UserID = &uid
			if name, ok := names[d.UserID]; ok {
				v.UserDisplayName = &name
			}
		}
		views[i] = v
	}
	writeList(c, views, params.Fields, meta)
	return nil
}
