package oauth

import (
	"maps"
	"time"

	"github.com/ory/fosite"

	"iam/models"
	"iam/models/identity"
)

// Session is what a code or token carries beside its request: the user and
// organization it acts for, and when each of its tokens expires. It is stored
// as JSON with the request. A service client's own token (the client
// credentials grant) has no user: UserID is 0, OrgID the client's.
type Session struct {
	UserID    int64                          `json:"user_id,string"`
	OrgID     int64                          `json:"org_id,string"`
	ExpiresAt map[fosite.TokenType]time.Time `json:"expires_at"`
	// AuthTime is when the user's grant was made (the consent, or the
	// issue without the browser). Every token of the grant carries it, the
	// access tokens made from a refresh token too: a token whose AuthTime
	// is before the user's TokensValidAfter is refused. Zero in sessions
	// stored before it existed, which a revocation then ends as well.
	AuthTime time.Time `json:"auth_time,omitzero"`
}

var _ fosite.Session = (*Session)(nil)

func newSession(user *identity.User) *Session {
	return &Session{UserID: user.ID, OrgID: user.OrgID, AuthTime: time.Now().UTC()}
}

// SetExpiresAt implements fosite.Session.
func (s *Session) SetExpiresAt(key fosite.TokenType, exp time.Time) {
	if s.ExpiresAt == nil {
		s.ExpiresAt = make(map[fosite.TokenType]time.Time)
	}
	s.ExpiresAt[key] = exp
}

// GetExpiresAt implements fosite.Session; zero means never.
func (s *Session) GetExpiresAt(key fosite.TokenType) time.Time {
	if s == nil {
		return time.Time{}
	}
	return s.ExpiresAt[key]
}

// GetUsername implements fosite.Session.
func (s *Session) GetUsername() string { return "" }

// GetSubject implements fosite.Session: the user id, which the store keys
// the refresh token cap on; empty for a token without a user.
func (s *Session) GetSubject() string {
	if s == nil || s.UserID == 0 {
		return ""
	}
	return models.FormatID(s.UserID)
}

// Clone implements fosite.Session.
func (s *Session) Clone() fosite.Session {
	if s == nil {
		return nil
	}
	c := *s
	c.ExpiresAt = maps.Clone(s.ExpiresAt)
	return &c
}
