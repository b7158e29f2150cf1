package identity

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

func (usersPG) lockManagerChanges(ctx context.Context, tx bun.Tx, orgID int64) error {
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?, ?)", managerLockSpace, int32(orgID)); err != nil { //nolint:gosec // the lock key is the id's low 32 bits: two organizations sharing one only wait for each other
		return fmt.Errorf("lock manager changes: %w", err)
	}
	return nil
}
