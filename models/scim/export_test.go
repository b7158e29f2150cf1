package scim

import "github.com/uptrace/bun"

// UserListQuery is the select ListUsers runs for q, for tests that explain
// its plan.
func (s *Store) UserListQuery(orgID int64, q Query) (*bun.SelectQuery, error) {
	c, err := userResource.where(q.Filter)
	if err != nil {
		return nil, err
	}
	return s.db.NewSelect().TableExpr("users AS u").ColumnExpr("u.id").
		Where("u.org_id = ?", orgID).Where(c.sql, c.args...), nil
}
