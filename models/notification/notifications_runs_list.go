package notification

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"iam/models"
	"iam/models/listing"
)

// ErrRunNotFound answers for a run that is not one of the schedule's in the
// caller's organization.
var ErrRunNotFound = models.NotFound("Run", "the notification run does not exist")

// NotificationRunListing is the allow-list of GET
// …/notification-auto-schedule/{id}/runs: offset paging, newest first, 100
// a page.
var NotificationRunListing = listing.MustSchema(listing.Schema{
	Name: "notification_runs",
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true},
		{Name: "status", Column: "status", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "scheduled_time", Column: "scheduled_at", Type: listing.TypeTime, Filter: true, Sort: true},
		{Name: "start_time", Column: "created_at", Type: listing.TypeTime, Filter: true, Sort: true},
		{Name: "end_time", Column: "finished_at", Type: listing.TypeTime, Filter: true},
		{Name: "recipients", Column: "recipients", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "deliveries", Column: "total", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "sent", Column: "sent", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "failed", Column: "failed", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "uncertain", Column: "uncertain", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "skipped", Column: "skipped", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "message"},
		{Name: "template"},
	},
	DefaultSort: "-scheduled_time",
	Paging:      listing.OffsetPaging,
})

// NotificationDeliveryListing is the allow-list of GET
// …/runs/{run_id}/deliveries: offset paging in delivery order, 100 a page.
var NotificationDeliveryListing = listing.MustSchema(listing.Schema{
	Name: "notification_deliveries",
	Key:  "seq",
	Attributes: []listing.Attribute{
		{Name: "seq", Column: "seq", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "kind", Column: "kind", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "status", Column: "state", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "channel", Column: "channel", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "address", Column: "address", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "user_id", Column: "user_id", Type: listing.TypeID, Filter: true},
		{Name: "attempts", Column: "attempts", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "updated_at", Column: "updated_at", Type: listing.TypeTime, Filter: true, Sort: true},
		{Name: "user_display_name"},
		{Name: "last_error"},
		{Name: "uncertain"},
	},
	Paging: listing.OffsetPaging,
})

// ListRuns returns a page of a schedule's runs. ErrScheduleNotFound when the
// schedule is not the organization's.
func (s *NotificationStore) ListRuns(ctx context.Context, orgID, scheduleID int64, p listing.Params) ([]NotificationRun, listing.Meta, error) {
	if err := s.scheduleExists(ctx, orgID, scheduleID); err != nil {
		return nil, nil, err
	}
	var out []NotificationRun
	q := s.db.NewSelect().Model(&out).Where("org_id = ? AND notification_id = ?", orgID, scheduleID)
	meta, err := listing.Fetch(ctx, q, &out, NotificationRunListing, p)
	return out, meta, err
}

// ListDeliveries returns a page of a run's deliveries. ErrScheduleNotFound
// when the schedule is not the organization's, ErrRunNotFound when the run
// is not the schedule's.
func (s *NotificationStore) ListDeliveries(ctx context.Context, orgID, scheduleID, runID int64, p listing.Params) ([]Delivery, listing.Meta, error) {
	if err := s.scheduleExists(ctx, orgID, scheduleID); err != nil {
		return nil, nil, err
	}
	ok, err := s.db.NewSelect().Model((*NotificationRun)(nil)).
		Where("id = ? AND org_id = ? AND notification_id = ?", runID, orgID, scheduleID).Exists(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("select run: %w", err)
	}
	if !ok {
		return nil, nil, ErrRunNotFound
	}
	var out []Delivery
	q := s.db.NewSelect().Model(&out).Where("run_id = ?", runID)
	meta, err := listing.Fetch(ctx, q, &out, NotificationDeliveryListing, p)
	return out, meta, err
}

// scheduleExists is ErrScheduleNotFound unless the schedule is the
// organization's.
func (s *NotificationStore) scheduleExists(ctx context.Context, orgID, scheduleID int64) error {
	var id int64
	err := s.db.NewSelect().Model((*NotificationSchedule)(nil)).Column("id").
		Where("org_id = ? AND id = ?", orgID, scheduleID).Scan(ctx, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrScheduleNotFound
	}
	if err != nil {
		return fmt.Errorf("select notification schedule: %w", err)
	}
	return nil
}
