package identity

import (
	"context"
	"fmt"
	"iam/models"

	"github.com/uptrace/bun"
)

// maxManagerChain bounds the walk up a chain of managers; a chain this deep
// is refused like a cycle.
const maxManagerChain = 1000

// checkManager checks user.ManagerID inside the writing transaction: the
// manager must be another user of the same organization, and the chain of
// managers above it must not lead back to the user. On PostgreSQL a
// transaction-scoped advisory lock per organization serializes manager
// changes, so two concurrent changes cannot close a cycle between them
// (SQLite runs one writer at a time anyway). EINVALID on field "manager".
func checkManager(ctx context.Context, tx bun.Tx, user *User) error {
	if user.ManagerID == nil {
		return nil
	}
	manager := *user.ManagerID
	if manager == user.ID {
		return models.Invalid("manager", "cannot be the user itself")
	}
	if err := usersDialectOf(tx).lockManagerChanges(ctx, tx, user.OrgID); err != nil {
		return err
	}
	var found, loops, depth int
	err := tx.NewRaw(`
		WITH RECURSIVE chain (id, manager_id, depth) AS (
			SELECT id, manager_id, 0 FROM users WHERE org_id = ? AND id = ?
			UNION ALL
			SELECT u.id, u.manager_id, c.depth + 1 FROM users AS u JOIN chain AS c ON u.id = c.manager_id
			WHERE u.org_id = ? AND c.depth < ? AND c.id <> ?
		)
		SELECT count(*), COALESCE(sum(CASE WHEN id = ? THEN 1 ELSE 0 END), 0), COALESCE(max(depth), 0) FROM chain`,
		user.OrgID, manager, user.OrgID, maxManagerChain, user.ID, user.ID,
	).Scan(ctx, &found, &loops, &depth)
	switch {
	case err != nil:
		return fmt.Errorf("check manager chain: %w", err)
	case found == 0:
		return models.Invalid("manager", "is not a user of the organization")
	case loops > 0:
		return models.Invalid("manager", "would make the user a manager of itself (a cycle of managers)")
	case depth >= maxManagerChain:
		return models.Invalid("manager", "has a chain of managers deeper than %d", maxManagerChain)
	}
	return nil
}

// managerLockSpace is the first key of the advisory lock of manager changes.
const managerLockSpace = 0x1a0001
