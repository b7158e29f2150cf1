package notification

import (
	"context"

	"iam/models/listing"
)

// TemplateListing is the allow-list of GET /templates/notification: offset
// paging, by name by default, 100 a page.
var TemplateListing = listing.MustSchema(listing.Schema{
	Name: "notification_templates",
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true},
		{Name: "name", Column: "name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "description", Column: "description", Type: listing.TypeString, Filter: true},
		{Name: "share_type", Column: "share_type", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "module", Column: "module", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "is_default", Column: "is_default", Type: listing.TypeBoolean, Filter: true, Sort: true},
		{Name: "configurations"},
		{Name: "mail"},
		{Name: "sms"},
	},
	DefaultSort: "name",
	Paging:      listing.OffsetPaging,
})

// List returns a page of the templates userID may see.
func (s *TemplateStore) List(ctx context.Context, orgID, userID int64, p listing.Params) ([]Template, listing.Meta, error) {
	var out []Template
	q := visible(s.db.NewSelect().Model(&out), orgID, userID)
	meta, err := listing.Fetch(ctx, q, &out, TemplateListing, p)
	return out, meta, err
}
