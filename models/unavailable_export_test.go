package models

import (
	"context"
	"database/sql/driver"
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

// RetryConnector exposes the connector of Open to the tests.
func RetryConnector(c driver.Connector) driver.Connector { return retryConnector{c} }

// ConnectAttempts is how many times RetryConnector tries a connection.
const ConnectAttempts = connectAttempts
