package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"iam/models/listing"
)

// UserListing is the allow-list of GET /users and the attributes membership
// rules of dynamic groups may test: cursor paging, id order by default.
// Every text attribute can be filtered on; the sortable ones are NOT NULL
// columns. primarySource may only be picked by fields.
var UserListing = listing.MustSchema(listing.Schema{
	Name:   "users",
	Paging: listing.CursorPaging,
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "firstName", Column: "first_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "lastName", Column: "last_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "displayName", Column: "display_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "email", Column: "email", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "employeeID", Column: "employee_id", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "title", Column: "title", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "department", Column: "department", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "company", Column: "company", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "description", Column: "description", Type: listing.TypeString, Filter: true},
		{Name: "manager", Column: "manager_id", Type: listing.TypeID, Filter: true},
		{Name: "city", Column: "city", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "stateProvince", Column: "state_province", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "street", Column: "street", Type: listing.TypeString, Filter: true},
		{Name: "zipPostal", Column: "zip_postal", Type: listing.TypeString, Filter: true},
		{Name: "postOfficeBox", Column: "post_office_box", Type: listing.TypeString, Filter: true},
		{Name: "workLocation", Column: "work_location", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "seatingLocation", Column: "seating_location", Type: listing.TypeString, Filter: true},
		{Name: "country", Column: "country", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "mobileNumber", Column: "mobile_number", Type: listing.TypeString, Filter: true},
		{Name: "homePhone", Column: "home_phone", Type: listing.TypeString, Filter: true},
		{Name: "telephoneNumber", Column: "telephone_number", Type: listing.TypeString, Filter: true},
		{Name: "fax", Column: "fax", Type: listing.TypeString, Filter: true},
		{Name: "gender", Column: "gender", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "language", Column: "language", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "isDomainVerified", Column: "is_domain_verified", Type: listing.TypeBoolean, Filter: true, Sort: true},
		{Name: "status", Column: "status", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "isLicensed", Column: "is_licensed", Type: listing.TypeBoolean, Filter: true, Sort: true},
		{Name: "primarySource"},
	},
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

// signInColumns are the columns of sign-in state and role, which lists
// leave out: users read from a list have them zero.
var signInColumns = []string{"role", "password_hash", "failed_logins", "first_failed_login_at", "blocked_until", "tokens_valid_after"}

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

// countByLicensing reads the organization's user count, or its licensed or
// unlicensed part, from user_counts: a row per organization that triggers
// keep in step with every insert, delete and licensing change of users, in
// the writing transaction. A list without a filter takes its total from it
// rather than counting up to millions of rows per page.
func (s *UserStore) countByLicensing(ctx context.Context, orgID int64, licensing Licensing) (int64, error) {
	var users, licensed int64
	err := s.db.NewSelect().Table("user_counts").Column("users", "licensed").
		Where("org_id = ?", orgID).Scan(ctx, &users, &licensed)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
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
