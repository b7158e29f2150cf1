package decide

import (
	"context"
	"sync"

	"iam/models/protection"
)

// Source is where the Cache reads an organization's protection version and
// its enabled policies (the store).
type Source interface {
	ProtectionVersion(ctx context.Context, orgID int64) (int64, error)
	LoadEnabledPolicies(ctx context.Context, orgID int64) (*protection.PolicySet, error)
}

// Cache keeps one compiled snapshot per organization. Each Get reads the
// organization's protection version (one indexed read), which every change
// to policies, condition configs or device groups advances in the same
// transaction; the snapshot is rebuilt when it moved. Concurrent rebuilds
// of one organization are collapsed into one.
type Cache struct {
	src Source
	mu  sync.Mutex
	m   map[int64]*entry
	max int
}

type entry struct {
	mu   sync.Mutex // held while (re)building
	snap *Snapshot
}

// NewCache returns a cache over src holding at most max organizations
// (beyond that an arbitrary one is dropped).
func NewCache(src Source, max int) *Cache {
	if max <= 0 {
		max = 10000
	}
	return &Cache{src: src, m: map[int64]*entry{}, max: max}
}

// Get returns the organization's current snapshot.
func (c *Cache) Get(ctx context.Context, orgID int64) (*Snapshot, error) {
	v, err := c.src.ProtectionVersion(ctx, orgID)
	if err != nil {
		return nil, err
	}
	return c.At(ctx, orgID, v)
}

// At returns the organization's snapshot of version v, which the caller
// read (with other facts, in one query) just before.
func (c *Cache) At(ctx context.Context, orgID, v int64) (*Snapshot, error) {
	c.mu.Lock()
	e := c.m[orgID]
	if e == nil {
		if len(c.m) >= c.max {
			for k := range c.m {
				delete(c.m, k)
				break
			}
		}
		e = &entry{}
		c.m[orgID] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.snap != nil && e.snap.Version == v {
		return e.snap, nil
	}
	set, err := c.src.LoadEnabledPolicies(ctx, orgID)
	if err != nil {
		return nil, err
	}
	e.snap = Compile(orgID, v, set)
	return e.snap, nil
}
