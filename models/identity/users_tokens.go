package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models/oauthstore"

	"github.com/uptrace/bun"
)

// A user's tokens end with the user's right to them. Two mechanisms:
//
//   - on a password change (set or removed), a deactivation (status from 1
//     to 0) and a demotion (admin to user), Update sets the user's
//     tokens_valid_after to now and deletes every code, access token and
//     refresh token of the user, in the same transaction; deleting the
//     user deletes them too (foreign key);
//   - the authorization server checks the user's current state (TokenState)
//     whenever a token is used, so that whatever else changes a user (a
//     block, a write outside Update) ends its API access within the
//     server's cache bound.

// revokesTokens reports whether changing a user from before to after (and
// its password, when passwordChanged) ends the user's tokens and sign-ins.
func revokesTokens(before, after *User, passwordChanged bool) bool {
	return passwordChanged ||
		(before.Status == UserActive && after.Status != UserActive) ||
		(before.IsAdmin() && !after.IsAdmin())
}

// revokeUserTokens deletes every code, access token, refresh token and PKCE
// challenge of the user, inside the caller's transaction.
func revokeUserTokens(ctx context.Context, tx bun.IDB, userID int64) error {
	if _, err := tx.NewDelete().Model((*oauthstore.OAuthToken)(nil)).Where("user_id = ?", userID).Exec(ctx); err != nil {
		return fmt.Errorf("revoke the user's tokens: %w", err)
	}
	return nil
}

// TokenState returns what token checks need of a user of the organization:
// its id, organization, status, role, block and TokensValidAfter (the other
// fields are zero). ENOTFOUND when the user does not exist.
func (s *UserStore) TokenState(ctx context.Context, orgID, id int64) (*User, error) {
	u := new(User)
	err := s.db.NewSelect().Model(u).
		Column("id", "org_id", "status", "role", "blocked_until", "tokens_valid_after", "display_name", "email").
		Where("org_id = ? AND id = ?", orgID, id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrUserNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select user token state: %w", err)
	}
	return u, nil
}
