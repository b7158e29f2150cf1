package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// InTx and InTxOnce expose the transaction helpers to the tests.
func InTx(ctx context.Context, db bun.IDB, fn func(ctx context.Context, tx bun.Tx) error) error {
	return inTx(ctx, db, fn)
}

func InTxOnce(ctx context.Context, db bun.IDB, fn func(ctx context.Context, tx bun.Tx) error) error {
	return inTxOnce(ctx, db, fn)
}

// TxAttempts is how many times InTx runs a transaction at most.
const TxAttempts = txAttempts

// ShortTxBackoff makes InTx's waits short for a test; call the function it
// returns to restore them.
func ShortTxBackoff() func() {
	prev := txBackoff
	txBackoff = time.Millisecond
	return func() { txBackoff = prev }
}
