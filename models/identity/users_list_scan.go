package identity

import (
	"context"

	"github.com/uptrace/bun"

	"iam/models/listing"
)

// selectUserList starts the query of a list of users: UserListColumns of
// the organization's users.
func selectUserList(db bun.IDB, orgID int64) *bun.SelectQuery {
	return db.NewSelect().Model((*User)(nil)).Column(UserListColumns...).Where("org_id = ?", orgID)
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

// ScanUserList runs page, a select of UserListColumns in their order (its
// columns may be qualified by an alias), and appends its rows to dest as
// the lists of this area read them: without the sign-in state.
func ScanUserList(ctx context.Context, page *bun.SelectQuery, dest *[]User) error {
	return scanUserRows(ctx, page, dest)
}
