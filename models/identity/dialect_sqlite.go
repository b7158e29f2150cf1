package identity

import (
	"context"

	"github.com/uptrace/bun"
)

// lockManagerChanges does nothing: the single writer serializes them.
func (usersSQLite) lockManagerChanges(context.Context, bun.Tx, int64) error { return nil }
