package oauth

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/golang-lru/v2"

	"iam/models/identity"
)

// TestUserStates_CachedBrieflyAndBounded: a user's state is read once per
// TTL, read again after it, and the cache holds at most userStateCacheSize
// users; a user of another organization is not found.
func TestUserStates_CachedBrieflyAndBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	fetches := map[int64]int{}
	cache, err := lru.New[userKey, cachedUserState](userStateCacheSize)
	if err != nil {
		t.Fatal(err)
	}
	u := &userStates{
		ttl:   2 * time.Second,
		now:   func() time.Time { return now },
		cache: cache,
		fetch: func(_ context.Context, orgID, userID int64) (*identity.User, error) {
			fetches[userID]++
			if orgID != 1 {
				return nil, identity.ErrUserNotFound
			}
			return &identity.User{ID: userID, OrgID: 1, Status: identity.UserActive}, nil
		},
	}
	ctx := context.Background()
	for range 3 {
		if got, err := u.get(ctx, 1, 7); err != nil || got == nil || got.ID != 7 {
			t.Fatalf("get: %+v %v", got, err)
		}
	}
	if fetches[7] != 1 {
		t.Errorf("%d reads within the TTL, want 1", fetches[7])
	}
	now = now.Add(2 * time.Second)
	if _, err := u.get(ctx, 1, 7); err != nil {
		t.Fatal(err)
	}
	if fetches[7] != 2 {
		t.Errorf("%d reads after the TTL, want 2", fetches[7])
	}
	if got, _ := u.get(ctx, 2, 7); got != nil {
		t.Error("a cached user was found in another organization")
	}
	if got, _ := u.get(ctx, 1, 7); got == nil {
		t.Error("a miss in another organization hid the user in its own")
	}
	for id := int64(100); id < 100+userStateCacheSize*2; id++ {
		if _, err := u.get(ctx, 1, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := u.cache.Len(); n > userStateCacheSize {
		t.Errorf("the cache holds %d users, over its bound %d", n, userStateCacheSize)
	}
}
