package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/sqldb"
	"time"

	"github.com/uptrace/bun"
)

// UserChange edits a user in place during Update; a returned error aborts
// the update.
type UserChange func(u *User) error

// Update applies change to a user of the organization and saves it with
// its dynamic group memberships re-evaluated, in one transaction recording
// user.updated and (for a password) user.password_changed
// (recordUserUpdate); the user is locked while it changes. A non-nil password replaces the password
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
		// What the event compares, taken before change can touch what u
		// points to.
		beforeView := userAuditView(u)
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
			return userWriteError(err, "update user", u)
		}
		if revoke {
			if err := revokeUserTokens(ctx, tx, id); err != nil {
				return err
			}
		}
		if err := recordUserUpdate(ctx, beforeView, u, password != nil); err != nil {
			return err
		}
		user = u
		return SyncMembership(ctx, tx, orgID, []int64{id})
	})
	if err != nil {
		return nil, err
	}
	return user, nil
}

// recordUserUpdate records the events of an update to after from before
// (userAuditView of the user before the update):
// user.updated with the fields it changed (also when it changed none, as a
// request that rewrites every field with its value does, unless it only
// changed the password), and user.password_changed when the password was
// set, replaced or removed (its target saying only that it changed).
func recordUserUpdate(ctx context.Context, before map[string]any, after *User, passwordChanged bool) error {
	changes := audit.Changes(before, userAuditView(after))
	if len(changes) > 0 || !passwordChanged {
		target := userTarget(after)
		target.Changes = changes
		if err := models.Record(ctx, models.AuditEvent{OrgID: after.OrgID, Type: audit.UserUpdated,
			Targets: []models.EventTarget{target}}); err != nil {
			return err
		}
	}
	if !passwordChanged {
		return nil
	}
	target := userTarget(after)
	target.Changes = []models.FieldChange{{Field: "password", Secret: true}}
	return models.Record(ctx, models.AuditEvent{OrgID: after.OrgID, Type: audit.UserPasswordChanged,
		Targets: []models.EventTarget{target}})
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

// DeleteIf is Delete of a user that check accepts: the user is read and
// locked in the delete's transaction and given to check, whose error is
// returned with nothing deleted (a conditional delete: SCIM's If-Match).
// check may run more than once (InTx).
func (s *UserStore) DeleteIf(ctx context.Context, orgID, id int64, check func(*User) error) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		u := new(User)
		err := sqldb.DialectOf(tx).LockRows(tx.NewSelect().Model(u).Where("org_id = ? AND id = ?", orgID, id), "UPDATE").Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrUserNotFound
		}
		if err != nil {
			return fmt.Errorf("select user: %w", err)
		}
		if err = check(u); err != nil {
			return err
		}
		_, err = s.deleteManyTx(ctx, tx, orgID, []int64{id})
		return err
	})
}

// DeleteMany removes the users ids of the organization that exist, in one
// transaction recording user.deleted naming each (MaxEventTargets users an
// event), and returns the ids it removed; ids of users that do not
// exist in the organization are ignored. Memberships go with the users
// (group counts follow); users they managed are left without a manager,
// their dynamic memberships re-evaluated; local accounts linked to them are
// unlinked (docs/devices.md).
func (s *UserStore) DeleteMany(ctx context.Context, orgID int64, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return []int64{}, nil
	}
	var deleted []int64
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) (err error) {
		deleted, err = s.deleteManyTx(ctx, tx, orgID, ids)
		return err
	})
	if err != nil {
		return nil, err
	}
	return deleted, nil
}

// deleteManyTx is DeleteMany inside tx.
func (s *UserStore) deleteManyTx(ctx context.Context, tx bun.Tx, orgID int64, ids []int64) ([]int64, error) {
	gone, err := deleteUsers(ctx, tx, orgID, ids, s.beforeDelete)
	if err != nil {
		return nil, err
	}
	deleted := make([]int64, len(gone))
	targets := make([]models.EventTarget, len(gone))
	for i := range gone {
		deleted[i] = gone[i].ID
		targets[i] = userTarget(&gone[i])
	}
	return deleted, recordChunked(ctx, orgID, audit.UserDeleted, nil, targets)
}

// DeleteUsers is DeleteMany inside tx: it removes the users ids of the
// organization that exist and returns their ids. Memberships (static and
// dynamic), enrollment data and tokens go with the users through their
// foreign keys; users they managed are left without a manager, their
// dynamic memberships re-evaluated; local accounts linked to them are
// unlinked first by before (when not nil: UserStore.BeforeDelete).
//
// DeleteUsers records no event: the caller does (DeleteMany records
// user.deleted; a job's deletions are its results).
func DeleteUsers(ctx context.Context, tx bun.Tx, orgID int64, ids []int64, before UsersDeletedFunc) ([]int64, error) {
	gone, err := deleteUsers(ctx, tx, orgID, ids, before)
	if err != nil {
		return nil, err
	}
	deleted := make([]int64, len(gone))
	for i := range gone {
		deleted[i] = gone[i].ID
	}
	return deleted, nil
}

// deleteUsers is DeleteUsers returning the removed users' ids, display
// names and emails (their other fields zero), for their events.
func deleteUsers(ctx context.Context, tx bun.Tx, orgID int64, ids []int64, before UsersDeletedFunc) ([]User, error) {
	deleted := []User{}
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
		Returning("id, display_name, email").
		Scan(ctx, &deleted)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("delete users: %w", err)
	}
	return deleted, SyncMembership(ctx, tx, orgID, reports)
}
