package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models/sqldb"
	"time"

	"github.com/uptrace/bun"
)

// UserChange edits a user in place during Update; a returned error aborts
// the update.
type UserChange func(u *User) error

// Update applies change to a user of the organization and saves it with
// its dynamic group memberships re-evaluated, in one transaction; the user
// is locked while it changes. A non-nil password replaces the password
// (empty removes it). It returns the saved user. ENOTFOUND when missing;
// EINVALID and ECONFLICT as for Create. A password change, deactivation or
// demotion ends the user's tokens and sign-ins (users_tokens.go).
func (s *UserStore) Update(ctx context.Context, orgID, id int64, change UserChange, password *string) (*User, error) {
	var hash string
	if password != nil && *password != "" {
		h, err := hashPassword(*password)
		if err != nil {
			return nil, err
		}
		hash = h
	}
	var user *User
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if _, err := LockDynamicGroups(ctx, tx, orgID); err != nil {
			return err
		}
		u := new(User)
		q := sqldb.DialectOf(tx).LockRows(tx.NewSelect().Model(u).Where("org_id = ? AND id = ?", orgID, id), "UPDATE")
		if err := q.Scan(ctx); errors.Is(err, sql.ErrNoRows) {
			return ErrUserNotFound
		} else if err != nil {
			return fmt.Errorf("select user: %w", err)
		}
		oldManager := u.ManagerID
		before := *u
		if err := change(u); err != nil {
			return err
		}
		u.ID, u.OrgID = id, orgID // not changeable
		if err := checkUser(u); err != nil {
			return err
		}
		if !sameID(oldManager, u.ManagerID) {
			if err := checkManager(ctx, tx, u); err != nil {
				return err
			}
		}
		if password != nil {
			u.PasswordHash = hash
		}
		u.UpdatedAt = time.Now().UTC()
		revoke := revokesTokens(&before, u, password != nil)
		if revoke {
			now := u.UpdatedAt.Truncate(time.Microsecond) // as PostgreSQL keeps it
			u.TokensValidAfter = &now
		}
		if _, err := tx.NewUpdate().Model(u).WherePK().Exec(ctx); err != nil {
			return userWriteError(err, "update user")
		}
		if revoke {
			if err := revokeUserTokens(ctx, tx, id); err != nil {
				return err
			}
		}
		user = u
		return SyncMembership(ctx, tx, orgID, []int64{id})
	})
	if err != nil {
		return nil, err
	}
	return user, nil
}

func sameID(a, b *int64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// Delete removes a user of the organization with its memberships; the
// users it managed are left without a manager. ENOTFOUND when missing.
func (s *UserStore) Delete(ctx context.Context, orgID, id int64) error {
	deleted, err := s.DeleteMany(ctx, orgID, []int64{id})
	if err != nil {
		return err
	}
	if len(deleted) == 0 {
		return ErrUserNotFound
	}
	return nil
}

// DeleteMany removes the users ids of the organization that exist, in one
// transaction, and returns the ids it removed; ids of users that do not
// exist in the organization are ignored. Memberships go with the users
// (group counts follow); users they managed are left without a manager,
// their dynamic memberships re-evaluated; local accounts linked to them are
// unlinked (docs/devices.md).
func (s *UserStore) DeleteMany(ctx context.Context, orgID int64, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return []int64{}, nil
	}
	var deleted []int64
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		var err error
		deleted, err = DeleteUsers(ctx, tx, orgID, ids, s.beforeDelete)
		return err
	})
	if err != nil {
		return nil, err
	}
	return deleted, nil
}

// DeleteUsers is DeleteMany inside tx: it removes the users ids of the
// organization that exist and returns their ids. Memberships (static and
// dynamic), enrollment data and tokens go with the users through their
// foreign keys; users they managed are left without a manager, their
// dynamic memberships re-evaluated; local accounts linked to them are
// unlinked first by before (when not nil: UserStore.BeforeDelete).
func DeleteUsers(ctx context.Context, tx bun.Tx, orgID int64, ids []int64, before UsersDeletedFunc) ([]int64, error) {
	deleted := []int64{}
	if _, err := LockDynamicGroups(ctx, tx, orgID); err != nil {
		return nil, err
	}
	if before != nil {
		if err := before(ctx, tx, orgID, ids); err != nil {
			return nil, err
		}
	}
	var reports []int64
	err := tx.NewUpdate().Model((*User)(nil)).
		Set("manager_id = NULL").
		Set("updated_at = ?", time.Now().UTC()).
		Where("org_id = ? AND manager_id IN (?) AND id NOT IN (?)", orgID, bun.List(ids), bun.List(ids)).
		Returning("id").
		Scan(ctx, &reports)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("clear manager of reports: %w", err)
	}
	err = tx.NewDelete().Model((*User)(nil)).
		Where("org_id = ? AND id IN (?)", orgID, bun.List(ids)).
		Returning("id").
		Scan(ctx, &deleted)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("delete users: %w", err)
	}
	return deleted, SyncMembership(ctx, tx, orgID, reports)
}
