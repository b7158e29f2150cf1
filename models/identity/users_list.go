package identity

import (
	"context"
	"fmt"

	"iam/models/listing"
)

// UserListing is the allow-list of GET /users and the attributes membership
// rules of dynamic groups may test: cursor paging, id order by default.
// The attributes are User's fields the API shows, filterable and sortable
// as their api tags say (UserAttributes, generated): every text attribute
// can be filtered on; the sortable ones are NOT NULL columns.
// primarySource may only be picked by fields.
var UserListing = listing.MustSchema(listing.Schema{
	Name:       "users",
	Paging:     listing.CursorPaging,
	Attributes: UserAttributes,
})

// MemberListing is the allow-list of GET /groups/{id}/members for a caller
// that may read groups but not users: a member is shown by id, displayName
// and email only, and only those can be filtered and sorted on (otherwise a
// filter would reveal any attribute, one guess at a time).
var MemberListing = listing.MustSchema(listing.Schema{
	Name:   "group members",
	Paging: listing.CursorPaging,
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "displayName", Column: "display_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "email", Column: "email", Type: listing.TypeString, Filter: true, Sort: true},
	},
})

// Licensing selects users by license for GET /users.
type Licensing string

// The licensing choices; LicensingBoth (or empty) selects every user.
const (
	Licensed      Licensing = "licensed"
	Unlicensed    Licensing = "unlicensed"
	LicensingBoth Licensing = "both"
)

// List returns a page of the organization's users chosen by licensing and
// p. Bad parameters give a *listing.ParamError.
func (s *UserStore) List(ctx context.Context, orgID int64, licensing Licensing, p listing.Params) ([]User, listing.Meta, error) {
	return s.ListInto(ctx, nil, orgID, licensing, p)
}

// ListInto is List reading the page into the array of buf (whose length
// it ignores) when that is large enough, so that the caller can recycle
// the slices of pages.
func (s *UserStore) ListInto(ctx context.Context, buf []User, orgID int64, licensing Licensing, p listing.Params) ([]User, listing.Meta, error) {
	users := buf[:0]
	if rows := userPageRows(p); cap(users) < rows {
		users = make([]User, 0, rows)
	}
	q := selectUserList(s.db, orgID)
	switch licensing {
	case Licensed:
		q = q.Where("is_licensed = ?", true)
	case Unlicensed:
		q = q.Where("is_licensed = ?", false)
	case LicensingBoth, "":
	default:
		return nil, nil, &listing.ParamError{Param: "licensing", Detail: "must be licensed, unlicensed or both"}
	}
	var count func(context.Context) (int64, error)
	if p.Filter == nil {
		count = func(ctx context.Context) (int64, error) { return s.countByLicensing(ctx, orgID, licensing) }
	}
	meta, err := listing.FetchScanned(ctx, q, &users, UserListing, p, count, scanUserRows)
	return users, meta, err
}

// Total returns how many users the organization has, from the counts the
// triggers keep (countByLicensing): no scan of the users, whatever their
// number.
func (s *UserStore) Total(ctx context.Context, orgID int64) (int64, error) {
	return s.countByLicensing(ctx, orgID, LicensingBoth)
}

// countByLicensing reads the organization's user count, or its licensed or
// unlicensed part, from user_counts: rows per organization (shards, one per
// writing connection's share; see the migration that made them) that
// triggers keep in step with every insert, delete and licensing change of
// users, in the writing transaction. A list without a filter takes its
// total from their sum rather than counting up to millions of rows per
// page.
func (s *UserStore) countByLicensing(ctx context.Context, orgID int64, licensing Licensing) (int64, error) {
	var users, licensed int64
	err := s.db.NewSelect().Table("user_counts").ColumnExpr("COALESCE(SUM(users), 0), COALESCE(SUM(licensed), 0)").
		Where("org_id = ?", orgID).Scan(ctx, &users, &licensed)
	if err != nil {
		return 0, fmt.Errorf("read user count: %w", err)
	}
	switch licensing {
	case Licensed:
		return licensed, nil
	case Unlicensed:
		return users - licensed, nil
	}
	return users, nil
}

// ListGroupMembers returns a page of the users who are members of a group
// of the organization, with the parameters of GET /users. ENOTFOUND when
// the group is not the organization's.
func (s *UserStore) ListGroupMembers(ctx context.Context, orgID, groupID int64, p listing.Params) ([]User, listing.Meta, error) {
	return s.listGroupMembers(ctx, orgID, groupID, UserListing, p)
}

// ListGroupMemberSummaries is ListGroupMembers with p checked against
// MemberListing: the caller shows only the members' id, displayName and
// email.
func (s *UserStore) ListGroupMemberSummaries(ctx context.Context, orgID, groupID int64, p listing.Params) ([]User, listing.Meta, error) {
	return s.listGroupMembers(ctx, orgID, groupID, MemberListing, p)
}

func (s *UserStore) listGroupMembers(ctx context.Context, orgID, groupID int64, schema *listing.Schema, p listing.Params) ([]User, listing.Meta, error) {
	if _, err := getGroup(ctx, s.db, orgID, groupID, false); err != nil {
		return nil, nil, err
	}
	users := make([]User, 0, userPageRows(p))
	q := selectUserList(s.db, orgID).Where("id IN (SELECT user_id FROM group_members WHERE group_id = ?)", groupID)
	meta, err := listing.FetchScanned(ctx, q, &users, schema, p, nil, scanUserRows)
	return users, meta, err
}
