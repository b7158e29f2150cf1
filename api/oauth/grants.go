package oauth

import (
	"time"

	"github.com/ory/fosite"

	"iam/models/identity"
)

// grantRefusal says why user may not hold a token with scopes at now, or
// returns nil. Scopes follow the user's role: an admin may grant every
// scope, any other user none. An inactive or blocked user may grant nothing.
func grantRefusal(user *identity.User, scopes []string, now time.Time) *fosite.RFC6749Error {
	switch {
	case user.Status != identity.UserActive:
		return fosite.ErrAccessDenied.WithHint("The user's account is inactive.")
	case user.BlockedUntil != nil && now.Before(*user.BlockedUntil):
		return fosite.ErrAccessDenied.WithHint("The user's account is blocked.")
	case len(withoutOffline(scopes)) > 0 && !user.IsAdmin():
		return fosite.ErrAccessDenied.WithHint("Only administrators may grant scopes to an application.")
	}
	return nil
}
