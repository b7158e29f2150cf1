package scim

import (
	"github.com/uptrace/bun"
)

// UserListQuery is the select of the first page ListUsers runs for q, for
// tests that explain its plan.
func (s *Store) UserListQuery(orgID int64, q Query) (*bun.SelectQuery, error) {
	base, order, err := s.query(userResource, "users", "u", orgID, q)
	if err != nil {
		return nil, err
	}
	return base().ColumnExpr(userListColumns).OrderExpr(order).Limit(int64(min(q.Count, MaxCount))), nil
}
