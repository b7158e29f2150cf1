package oauth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/golang-lru/v2"

	"iam/models"
	"iam/models/identity"
)

// A token is only as good as its user: every use of an access token (and
// every refresh) checks the user's current state, not the state when the
// token was issued (grantRefusal: active, not blocked, still an admin;
// revokedSince: its tokens not revoked since the grant). The state is read by
// primary key and cached per process for Config.UserStateTTL
// (DefaultUserStateTTL), in an LRU of userStateCacheSize users: a change made
// by any process reaches every other within that bound. (Password changes, deactivations and demotions
// also delete the user's tokens, which ends them at once everywhere.) A
// service client's own token has no user: it is only as good as its client,
// whose deletion deletes it (validate.go).

// DefaultUserStateTTL is how long a process trusts the user state it read.
const DefaultUserStateTTL = 2 * time.Second

// userStateCacheSize bounds the users whose state a process caches.
const userStateCacheSize = 10000

// errTokenUserRefused is the refusal of a token whose user may no longer
// use it; the API answers it like any invalid token (401).
var errTokenUserRefused = errors.New("the token's user may no longer use it")

// userKey is an organization and a user of it.
type userKey struct{ org, user int64 }

type cachedUserState struct {
	user    *identity.User // nil: the user does not exist
	fetched time.Time
}

// userStates reads users' token state through a bounded, short-lived cache.
type userStates struct {
	ttl   time.Duration
	now   func() time.Time
	cache *lru.Cache[userKey, cachedUserState]
	fetch func(ctx context.Context, orgID, userID int64) (*identity.User, error)
}

func newUserStates(ttl time.Duration, users *identity.UserStore) (*userStates, error) {
	cache, err := lru.New[userKey, cachedUserState](userStateCacheSize)
	if err != nil {
		return nil, fmt.Errorf("user state cache: %w", err)
	}
	return &userStates{ttl: ttl, now: time.Now, cache: cache, fetch: users.TokenState}, nil
}

// get returns the user's token state, or nil when the user does not exist
// in the organization.
func (u *userStates) get(ctx context.Context, orgID, userID int64) (*identity.User, error) {
	now := u.now()
	key := userKey{orgID, userID}
	if c, ok := u.cache.Get(key); ok && now.Sub(c.fetched) < u.ttl && now.Sub(c.fetched) >= 0 {
		return c.user, nil
	}
	user, err := u.fetch(ctx, orgID, userID)
	if models.ErrorCode(err) == models.ENOTFOUND {
		user, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if u.ttl > 0 {
		u.cache.Add(key, cachedUserState{user: user, fetched: now})
	}
	return user, nil
}

// checkTokenUser refuses a token of sess holding scopes when its user may no
// longer use it (errTokenUserRefused), or returns the store's error; it
// returns the user otherwise.
func (s *Server) checkTokenUser(ctx context.Context, sess *Session, scopes []string) (*identity.User, error) {
	user, err := s.userStates.get(ctx, sess.OrgID, sess.UserID)
	if err != nil {
		return nil, err
	}
	if user == nil {
		return nil, errTokenUserRefused
	}
	if grantRefusal(user, scopes, s.cfg.Now()) != nil || revokedSince(user, sess.AuthTime) {
		return nil, errTokenUserRefused
	}
	return user, nil
}

// revokedSince reports whether the user's tokens and sign-ins were revoked
// after t (a grant's AuthTime, a sign-in's time).
func revokedSince(user *identity.User, t time.Time) bool {
	return user.TokensValidAfter != nil && t.Before(*user.TokensValidAfter)
}
