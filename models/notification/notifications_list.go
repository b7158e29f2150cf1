package notification

import (
	"context"

	"iam/models/listing"
)

// NotificationScheduleListing is the allow-list of GET
// /protection/quick-enrollment/notification-auto-schedule: offset paging,
// by name, 100 a page.
var NotificationScheduleListing = listing.MustSchema(listing.Schema{
	Name: "notification_schedules",
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true},
		{Name: "name", Column: "name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "description", Column: "description", Type: listing.TypeString, Filter: true},
		{Name: "is_enabled", Column: "is_enabled", Type: listing.TypeBoolean, Filter: true, Sort: true},
		{Name: "notification_template_id", Column: "template_id", Type: listing.TypeID, Filter: true},
		{Name: "notification_template"},
		{Name: "technician"},
		{Name: "last_run_time"},
		{Name: "next_run_time"},
		{Name: "associated_groups_count"},
		{Name: "schedule_settings"},
	},
	DefaultSort: "name",
	Paging:      listing.OffsetPaging,
})

// ListSchedules returns a page of the organization's schedules.
func (s *NotificationStore) ListSchedules(ctx context.Context, orgID int64, p listing.Params) ([]NotificationSchedule, listing.Meta, error) {
	var out []NotificationSchedule
	q := s.db.NewSelect().Model(&out).Where("org_id = ?", orgID)
	meta, err := listing.Fetch(ctx, q, &out, NotificationScheduleListing, p)
	return out, meta, err
}
