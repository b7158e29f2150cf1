package models

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/uptrace/bun"

	"iam/models/listing"
)

// userListColumns are the columns a list of users reads, in the order
// scanUserRows scans them: every column of User but the sign-in ones
// (signInColumns), which users read from a list have zero.
var userListColumns = []string{
	"id", "org_id", "first_name", "last_name", "display_name", "email", "employee_id", "title",
	"department", "company", "description", "manager_id", "city", "state_province", "street",
	"zip_postal", "post_office_box", "work_location", "seating_location", "country",
	"mobile_number", "home_phone", "telephone_number", "fax", "gender", "language",
	"is_domain_verified", "status", "is_licensed", "primary_source", "created_at", "updated_at",
}

// selectUserList starts the query of a list of users: userListColumns of
// the organization's users.
func selectUserList(db bun.IDB, orgID int64) *bun.SelectQuery {
	return db.NewSelect().Model((*User)(nil)).Column(userListColumns...).Where("org_id = ?", orgID)
}

// userPageRows is how many rows the page of p reads (its limit, plus one to
// know whether it is the last), so that the page's slice is made once.
func userPageRows(p listing.Params) int {
	limit := p.Limit
	if limit <= 0 {
		limit = UserListing.DefaultLimit
	}
	return min(limit, UserListing.MaxLimit) + 1
}

// scanUserRows runs a page query of selectUserList and appends its rows to
// dest, scanning userListColumns in order straight into the fields. bun's
// scan, which looks up the field of every column of every row and sets it
// through reflection, cost as much CPU time as the driver's reading of the
// rows, a sixth of what a page of GET /users cost under load. The values
// are those bun's scan gives on both databases
// (TestUserStore_ListScansLikeBun): NULL manager_id is a nil ManagerID,
// NULL primary_source a nil PrimarySource (the JSON decoded otherwise),
// times as the driver reads them.
func scanUserRows(ctx context.Context, q *bun.SelectQuery, dest *[]User) error {
	rows, err := q.Rows(ctx)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		manager sql.NullInt64
		status  int64
		source  sql.RawBytes
	)
	users := *dest
	for rows.Next() {
		users = append(users, User{})
		u := &users[len(users)-1]
		if err := rows.Scan(&u.ID, &u.OrgID, &u.FirstName, &u.LastName, &u.DisplayName, &u.Email,
			&u.EmployeeID, &u.Title, &u.Department, &u.Company, &u.Description, &manager, &u.City,
			&u.StateProvince, &u.Street, &u.ZipPostal, &u.PostOfficeBox, &u.WorkLocation,
			&u.SeatingLocation, &u.Country, &u.MobileNumber, &u.HomePhone, &u.TelephoneNumber, &u.Fax,
			&u.Gender, &u.Language, &u.IsDomainVerified, &status, &u.IsLicensed, &source,
			&u.CreatedAt, &u.UpdatedAt); err != nil {
			*dest = users
			return err
		}
		if manager.Valid {
			u.ManagerID = new(int64)
			*u.ManagerID = manager.Int64
		}
		u.Status = int(status)
		if source != nil {
			if err := json.Unmarshal(source, &u.PrimarySource); err != nil {
				*dest = users
				return fmt.Errorf("user %d: primary_source: %w", u.ID, err)
			}
		}
	}
	*dest = users
	return rows.Err()
}
