package sqldb

import (
	"context"
	"database/sql/driver"
	"math/rand/v2"
	"time"

	"iam/models"
)

// Retries of a transaction that failed for a transient reason and was rolled
// back: at most txAttempts in all, waiting about txBackoff, then three times
// that, between them (with jitter), so that a failover or a restart a
// moment long goes unnoticed while an outage is answered within a second.
const txAttempts = 3

var txBackoff = 100 * time.Millisecond

// retryWait returns how long to wait before attempt n (1 is the first
// retry).
func retryWait(n int) time.Duration {
	d := txBackoff
	for range n - 1 {
		d *= 3
	}
	return d/2 + rand.N(d) //nolint:gosec // jitter of a retry's delay: nothing to predict
}

// sleepCtx waits d or until ctx ends; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// connectAttempts is how many times a new database connection is tried when
// the server refuses it for a transient reason (restarting, failing over,
// out of connections).
const connectAttempts = 2

// retryConnector opens PostgreSQL connections, trying again after a moment
// when the server refuses one for a transient reason: nothing was sent yet,
// so any statement (a read outside a transaction too) is safe to send on
// the connection that follows. With database/sql's own retry of a statement
// whose pooled connection turns out dead before it was sent (driver
// ErrBadConn), this is the in-process retry of statements outside a
// transaction; InTx retries transactions.
type retryConnector struct{ driver.Connector }

// Connect implements driver.Connector.
func (c retryConnector) Connect(ctx context.Context) (driver.Conn, error) {
	for attempt := 1; ; attempt++ {
		conn, err := c.Connector.Connect(ctx)
		if err == nil || attempt >= connectAttempts || !models.IsTransient(err) || !sleepCtx(ctx, retryWait(attempt)) {
			return conn, err
		}
	}
}
