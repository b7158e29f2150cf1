package sqldb

import (
	"context"
	"log/slog"
	"time"

	"github.com/uptrace/bun"
)

// IDGen exposes an id generator of its own to the tests.
type IDGen = idGenerator

// NewIDGen returns an unleased generator.
func NewIDGen() *IDGen { return newIDGenerator() }

// TryNext is tryNext for the tests: an id, or why none may be made now.
func (g *idGenerator) TryNext() (int64, error) { return g.tryNext() }

// LeaseNodeFor leases a node for gen with a lease of ttl.
func LeaseNodeFor(ctx context.Context, db *bun.DB, gen *IDGen, ttl time.Duration) (*IDLease, error) {
	return leaseNode(ctx, db, gen, ttl, slog.New(slog.DiscardHandler))
}

// StopRenewing stops the lease's renewals without releasing it, as a
// process cut off from the database would.
func (l *IDLease) StopRenewing() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// Claim tries to take node for the lease's generator.
func (l *IDLease) Claim(ctx context.Context, node int64) (bool, error) { return l.claim(ctx, node) }

// IDMillis is the millisecond of an id, since the id epoch.
func IDMillis(id int64) int64 { return id >> 22 }

// IDNode is the node of an id.
func IDNode(id int64) int64 { return id >> 12 & (NodeCount - 1) }
