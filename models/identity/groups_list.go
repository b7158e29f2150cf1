package identity

import (
	"context"

	"iam/models/listing"
)

// GroupListing is the allow-list of GET /groups: cursor paging, id order by
// default. members is not part of list items (GET /groups/{id} and
// GET /groups/{id}/members show them).
var GroupListing = listing.MustSchema(listing.Schema{
	Name:   "groups",
	Paging: listing.CursorPaging,
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "name", Column: "name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "description", Column: "description", Type: listing.TypeString, Filter: true},
		{Name: "members_count", Column: "members_count", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "when_created", Column: "when_created", Type: listing.TypeTime, Filter: true, Sort: true},
		{Name: "is_dynamic", Column: "is_dynamic", Type: listing.TypeBoolean, Filter: true, Sort: true},
		{Name: "membership_rule", Column: "membership_rule", Type: listing.TypeString, Filter: true},
		{Name: "membership_job_id"},
		{Name: "primary_source"},
	},
})

// List returns a page of the organization's groups.
func (s *GroupStore) List(ctx context.Context, orgID int64, p listing.Params) ([]Group, listing.Meta, error) {
	groups := []Group{}
	q := s.db.NewSelect().Model(&groups).Where("org_id = ?", orgID)
	meta, err := listing.Fetch(ctx, q, &groups, GroupListing, p)
	return groups, meta, err
}
