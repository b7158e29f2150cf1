package decide_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"iam/models/decide"
	"iam/models/protection"
)

type fakeSource struct {
	version atomic.Int64
	loads   atomic.Int64
}

func (f *fakeSource) ProtectionVersion(context.Context, int64) (int64, error) {
	return f.version.Load(), nil
}

func (f *fakeSource) LoadEnabledPolicies(context.Context, int64) (*protection.PolicySet, error) {
	f.loads.Add(1)
	return &protection.PolicySet{Policies: []protection.Policy{{ID: 1, Name: "Default", IsEnabled: true, IsDefault: true, AccessType: "allow"}}}, nil
}

// TestCache_FollowsTheVersion: a snapshot is loaded once per organization
// and version, by one of many concurrent callers, and again when the
// version moves.
func TestCache_FollowsTheVersion(t *testing.T) {
	src := &fakeSource{}
	c := decide.NewCache(src, 10)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Get(t.Context(), 7); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := src.loads.Load(); n != 1 {
		t.Fatalf("%d loads for one version, want 1", n)
	}
	src.version.Store(3)
	snap, err := c.Get(t.Context(), 7)
	if err != nil || snap.Version != 3 || src.loads.Load() != 2 {
		t.Fatalf("after a version change: %+v %v, %d loads", snap, err, src.loads.Load())
	}
	if _, err := c.Get(t.Context(), 8); err != nil || src.loads.Load() != 3 {
		t.Fatalf("another organization: %d loads", src.loads.Load())
	}
}
