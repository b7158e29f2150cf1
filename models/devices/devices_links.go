package devices

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/sqldb"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// AccountNotFound is the error of a local account not on the device.
func AccountNotFound(id int64) *models.Error {
	return models.NotFound("Local Account", "no local account with the id "+models.FormatID(id)+" on the device")
}

// LinkRequest asks for a local account to be linked to an identity user.
type LinkRequest struct {
	UserID          int64
	PermissionLevel string
	// LinkType is Manual for an admin's link, Automatic for a sync's.
	LinkType string
	// Actor names who asks (an admin's user id, or the job).
	Actor string
	JobID *int64
}

// Link types.
const (
	LinkManual    = "Manual"
	LinkAutomatic = "Automatic"
)

func stateConflict(state, move string) *models.Error {
	return &models.Error{Code: models.ECONFLICT, Title: "Invalid Link State",
		Detail: fmt.Sprintf("the account is %s; %s is not possible in that state", state, move)}
}

// lockAccount reads, with its device locked, an account of a device of the
// organization whose agent is not being uninstalled.
func (s *DeviceStore) lockAccount(ctx context.Context, tx bun.Tx, orgID, deviceID, accountID int64) (*Device, *LocalAccount, error) {
	d, err := s.lockDevice(ctx, tx, orgID, deviceID)
	if err != nil {
		return nil, nil, err
	}
	var a LocalAccount
	if err := tx.NewSelect().Model(&a).Where("id = ? AND device_id = ?", accountID, d.ID).Scan(ctx); err != nil {
		if models.IsNoRows(err) {
			return nil, nil, AccountNotFound(accountID)
		}
		return nil, nil, fmt.Errorf("read account: %w", err)
	}
	if d.UninstallRequestedAt != nil {
		return nil, nil, &models.Error{Code: models.ECONFLICT, Title: "Device Uninstalled", Detail: "the device's agent is being or was uninstalled"}
	}
	return d, &a, nil
}

// Link starts linking a local account to an identity user of the
// organization: the account becomes pending_link and a link command waits
// for the device; the agent's done ack makes it linked, a failed ack
// unlinked. ENOTFOUND for an unknown device or account; ECONFLICT (naming
// the current state) unless the account is unlinked, or when the user is
// already linked to another account of the device; EINVALID for a
// restricted name, an unknown user or a bad permission level. Records
// device.account.link_requested.
func (s *DeviceStore) Link(ctx context.Context, orgID, deviceID, accountID int64, r LinkRequest) (*LocalAccount, error) {
	if r.PermissionLevel == "Admin" {
		r.PermissionLevel = "Administrator"
	}
	if !models.OneOf(r.PermissionLevel, PermissionLevels) {
		return nil, models.Invalid("permission_level", "must be one of %v", PermissionLevels)
	}
	if r.LinkType == "" {
		r.LinkType = LinkManual
	}
	var out *LocalAccount
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		d, a, err := s.lockAccount(ctx, tx, orgID, deviceID, accountID)
		if err != nil {
			return err
		}
		if a.LinkStatus != LinkUnlinked {
			return stateConflict(a.LinkStatus, "link")
		}
		set, err := linkingSettings(ctx, tx, orgID)
		if err != nil {
			return err
		}
		for _, n := range set.LinkRestrictedLocalAccounts {
			if strings.EqualFold(n, a.UserName) {
				return models.Invalid("account_id", "the local account %q is restricted from linking", a.UserName)
			}
		}
		n, err := tx.NewSelect().Table("users").Where("id = ? AND org_id = ?", r.UserID, orgID).Count(ctx)
		if err != nil {
			return fmt.Errorf("read user: %w", err)
		}
		if n == 0 {
			return models.Invalid("idp_user_id", "no user with the id %s", models.FormatID(r.UserID))
		}
		before := linkStateOf(a)
		var other LocalAccount
		err = tx.NewSelect().Model(&other).Where("device_id = ? AND idp_user_id = ?", d.ID, r.UserID).Scan(ctx)
		if err == nil {
			return &models.Error{Code: models.ECONFLICT, Title: "User Already Linked",
				Detail: fmt.Sprintf("the user is already linked to the local account %q of this device", other.UserName)}
		} else if !models.IsNoRows(err) {
			return fmt.Errorf("read accounts: %w", err)
		}
		c, err := queueCommand(ctx, tx, d, &a.ID, CmdLink, map[string]string{
			"account_id": models.FormatID(a.ID), "user_name": a.UserName,
			"idp_user_id": models.FormatID(r.UserID), "permission_level": r.PermissionLevel,
		})
		if err != nil {
			return err
		}
		uid := r.UserID
		a.LinkStatus, a.LinkType, a.IdpUserID, a.LinkPermissionLevel = LinkPending, r.LinkType, &uid, r.PermissionLevel
		a.LinkCommandID, a.LinkedAt, a.UpdatedAt = &c.ID, nil, time.Now().UTC()
		if _, err := tx.NewUpdate().Model(a).WherePK().Exec(ctx); err != nil {
			if sqldb.IsUniqueViolation(err) {
				return &models.Error{Code: models.ECONFLICT, Title: "User Already Linked", Detail: "the user is already linked to another local account of this device"}
			}
			return fmt.Errorf("update account: %w", err)
		}
		out = a
		if err := recordLink(ctx, tx, audit.DeviceAccountLinkRequest, d, before, a, "", ""); err != nil {
			return err
		}
		return addHistory(ctx, tx, &LinkEvent{OrgID: orgID, DeviceID: d.ID, DeviceName: d.Name, AccountID: &a.ID,
			UserName: a.UserName, IdpUserID: &uid, Action: "link", LinkType: r.LinkType,
			OldState: LinkUnlinked, NewState: LinkPending, Actor: r.Actor, JobID: r.JobID})
	})
	return out, err
}

// CancelLink takes back a pending link: the account is unlinked and the
// link command withdrawn (should the agent have applied it already, its
// done ack brings an unlink). Records device.account.link_canceled.
// ECONFLICT unless the account is pending_link.
func (s *DeviceStore) CancelLink(ctx context.Context, orgID, deviceID, accountID int64, actor string) (*LocalAccount, error) {
	var out *LocalAccount
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		d, a, err := s.lockAccount(ctx, tx, orgID, deviceID, accountID)
		if err != nil {
			return err
		}
		if a.LinkStatus != LinkPending {
			return stateConflict(a.LinkStatus, "cancel-link")
		}
		if a.LinkCommandID != nil {
			if _, err := tx.NewUpdate().Table("device_commands").Set("status = ?", CommandWithdrawn).
				Where("id = ? AND status = ?", *a.LinkCommandID, CommandPending).Exec(ctx); err != nil {
				return fmt.Errorf("withdraw command: %w", err)
			}
		}
		ev := &LinkEvent{OrgID: orgID, DeviceID: d.ID, DeviceName: d.Name, AccountID: &a.ID, UserName: a.UserName,
			IdpUserID: a.IdpUserID, Action: "cancel_link", LinkType: a.LinkType, OldState: LinkPending,
			NewState: LinkUnlinked, Actor: actor}
		before := linkStateOf(a)
		unlinkAccount(a)
		if _, err := tx.NewUpdate().Model(a).WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("update account: %w", err)
		}
		out = a
		if err := recordLink(ctx, tx, audit.DeviceAccountLinkCanceled, d, before, a, "", ""); err != nil {
			return err
		}
		return addHistory(ctx, tx, ev)
	})
	return out, err
}

// Unlink unlinks a linked account at once and sends the device an unlink
// command. Records device.account.unlinked with the reason. ECONFLICT
// unless the account is linked.
func (s *DeviceStore) Unlink(ctx context.Context, orgID, deviceID, accountID int64, actor, reason string) (*LocalAccount, error) {
	if len(reason) > MaxAckMessageLen {
		return nil, models.Invalid("reason", "at most %d bytes", MaxAckMessageLen)
	}
	var out *LocalAccount
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		d, a, err := s.lockAccount(ctx, tx, orgID, deviceID, accountID)
		if err != nil {
			return err
		}
		if a.LinkStatus != LinkLinked {
			return stateConflict(a.LinkStatus, "unlink")
		}
		if _, err := queueCommand(ctx, tx, d, &a.ID, CmdUnlink, map[string]string{
			"account_id": models.FormatID(a.ID), "user_name": a.UserName}); err != nil {
			return err
		}
		ev := &LinkEvent{OrgID: orgID, DeviceID: d.ID, DeviceName: d.Name, AccountID: &a.ID, UserName: a.UserName,
			IdpUserID: a.IdpUserID, Action: "unlink", LinkType: a.LinkType, OldState: LinkLinked,
			NewState: LinkUnlinked, Actor: actor, Reason: reason}
		before := linkStateOf(a)
		unlinkAccount(a)
		if _, err := tx.NewUpdate().Model(a).WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("update account: %w", err)
		}
		if err := recountAccounts(ctx, tx, d.ID); err != nil {
			return err
		}
		out = a
		if err := recordLink(ctx, tx, audit.DeviceAccountUnlinked, d, before, a, "", reason); err != nil {
			return err
		}
		return addHistory(ctx, tx, ev)
	})
	return out, err
}

func unlinkAccount(a *LocalAccount) {
	a.LinkStatus, a.LinkType, a.IdpUserID, a.LinkPermissionLevel = LinkUnlinked, "", nil, ""
	a.LinkCommandID, a.LinkedAt, a.UpdatedAt = nil, nil, time.Now().UTC()
}

// Account returns a local account of a device of the organization.
func (s *DeviceStore) Account(ctx context.Context, orgID, deviceID, accountID int64) (*LocalAccount, error) {
	if _, err := s.Get(ctx, orgID, deviceID); err != nil {
		return nil, err
	}
	var a LocalAccount
	if err := s.db.NewSelect().Model(&a).Where("id = ? AND device_id = ?", accountID, deviceID).Scan(ctx); err != nil {
		if models.IsNoRows(err) {
			return nil, AccountNotFound(accountID)
		}
		return nil, models.Unavailable(fmt.Errorf("read account: %w", err))
	}
	return &a, nil
}

// Accounts returns the local accounts of a device of the organization by
// name. ENOTFOUND (Device Not Found) for an unknown device.
func (s *DeviceStore) Accounts(ctx context.Context, orgID, deviceID int64) ([]LocalAccount, error) {
	if _, err := s.Get(ctx, orgID, deviceID); err != nil {
		return nil, err
	}
	var out []LocalAccount
	if err := s.db.NewSelect().Model(&out).Where("device_id = ?", deviceID).OrderExpr("user_name, id").Scan(ctx); err != nil {
		return nil, models.Unavailable(fmt.Errorf("read accounts: %w", err))
	}
	return out, nil
}

// History returns the organization's link history, oldest first.
func (s *DeviceStore) History(ctx context.Context, orgID int64) ([]LinkEvent, error) {
	var out []LinkEvent
	if err := s.db.NewSelect().Model(&out).Where("org_id = ?", orgID).OrderExpr("created_at, id").Scan(ctx); err != nil {
		return nil, models.Unavailable(fmt.Errorf("read link history: %w", err))
	}
	return out, nil
}

// OfflineUsers returns the offline-enrolled users of a device of the
// organization, but for those whose removal is under way.
func (s *DeviceStore) OfflineUsers(ctx context.Context, orgID, deviceID int64) ([]OfflineUser, error) {
	if _, err := s.Get(ctx, orgID, deviceID); err != nil {
		return nil, err
	}
	var out []OfflineUser
	if err := s.db.NewSelect().Model(&out).Where("device_id = ? AND removal_command_id IS NULL", deviceID).
		OrderExpr("user_id").Scan(ctx); err != nil {
		return nil, models.Unavailable(fmt.Errorf("read offline users: %w", err))
	}
	return out, nil
}

// RemoveOfflineUsers takes offline-enrolled users off a device: each leaves
// the list at once and the device gets a remove_offline_user command.
// Returns the ids removed (the others were not on the list), recorded in
// one device.offline_user.removed (the device first, then the users; one
// more event per 999 users). ENOTFOUND (Device Not Found) for an unknown
// device.
func (s *DeviceStore) RemoveOfflineUsers(ctx context.Context, orgID, deviceID int64, userIDs []int64) ([]int64, error) {
	var removed []int64
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		removed = removed[:0]
		d, err := s.lockDevice(ctx, tx, orgID, deviceID)
		if err != nil {
			return err
		}
		// The entries on the list, with their names for the event; every
		// writer of a device's offline users holds the device's lock.
		var listed []OfflineUser
		if len(userIDs) > 0 {
			if err := tx.NewSelect().Model(&listed).Column("user_id", "display_name", "user_name").
				Where("device_id = ? AND user_id IN (?) AND removal_command_id IS NULL", d.ID, bun.List(userIDs)).
				Scan(ctx); err != nil {
				return fmt.Errorf("read offline users: %w", err)
			}
		}
		names := make(map[int64]string, len(listed))
		for _, u := range listed {
			names[u.UserID] = cmp.Or(u.DisplayName, u.UserName)
		}
		var targets []models.EventTarget
		for _, id := range userIDs {
			name, ok := names[id]
			if !ok {
				continue
			}
			delete(names, id) // an id named twice is removed once
			c := &Command{ID: sqldb.NewID()}
			res, err := tx.NewUpdate().Table("device_offline_users").Set("removal_command_id = ?", c.ID).
				Where("device_id = ? AND user_id = ? AND removal_command_id IS NULL", d.ID, id).Exec(ctx)
			if err != nil {
				return fmt.Errorf("remove offline user: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue
			}
			b := fmt.Appendf(nil, `{"user_id":%q}`, models.FormatID(id))
			c.OrgID, c.DeviceID, c.Type, c.Args, c.Status, c.CreatedAt = d.OrgID, d.ID, CmdRemoveOfflineUser, b, CommandPending, time.Now().UTC()
			if _, err := tx.NewInsert().Model(c).Exec(ctx); err != nil {
				return fmt.Errorf("queue command: %w", err)
			}
			removed = append(removed, id)
			targets = append(targets, audit.Target(OfflineUserTargetType, id, name))
		}
		if len(targets) == 0 {
			return nil
		}
		return recordBulk(ctx, orgID, audit.DeviceOfflineUserRemoved, deviceTarget(d), targets)
	})
	return removed, err
}

// UnlinkDeletedUsers unlinks, in the transaction deleting them, every local
// account linked or pending to the users ids of the organization: a linked
// account gets an unlink command, a pending link's command is withdrawn,
// and the history says why. Devices are locked in id order. It makes a
// statement per kind of write, whatever the number of accounts (a bulk
// delete passes thousands of users at once).
func UnlinkDeletedUsers(ctx context.Context, tx bun.Tx, orgID int64, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	var accs []LocalAccount
	if err := tx.NewSelect().Model(&accs).Where("org_id = ? AND idp_user_id IN (?)", orgID, bun.List(ids)).
		OrderExpr("device_id, id").Scan(ctx); err != nil {
		return fmt.Errorf("read linked accounts: %w", err)
	}
	if len(accs) == 0 {
		return nil
	}
	var deviceIDs, accountIDs, withdrawn []int64
	for _, a := range accs {
		if len(deviceIDs) == 0 || deviceIDs[len(deviceIDs)-1] != a.DeviceID {
			deviceIDs = append(deviceIDs, a.DeviceID)
		}
		accountIDs = append(accountIDs, a.ID)
		if a.LinkCommandID != nil {
			withdrawn = append(withdrawn, *a.LinkCommandID)
		}
	}
	var devs []Device
	if err := sqldb.DialectOf(tx).LockRows(tx.NewSelect().Model(&devs).Where("id IN (?)", bun.List(deviceIDs)).
		OrderExpr("id"), "UPDATE").Scan(ctx); err != nil {
		return fmt.Errorf("read devices: %w", err)
	}
	byID := make(map[int64]*Device, len(devs))
	for i := range devs {
		byID[devs[i].ID] = &devs[i]
	}
	if len(withdrawn) > 0 {
		if _, err := tx.NewUpdate().Table("device_commands").Set("status = ?", CommandWithdrawn).
			Where("id IN (?) AND status = ?", bun.List(withdrawn), CommandPending).Exec(ctx); err != nil {
			return fmt.Errorf("withdraw commands: %w", err)
		}
	}
	now := time.Now().UTC()
	var cmds []Command
	history := make([]LinkEvent, 0, len(accs))
	for i := range accs {
		a := &accs[i]
		dev := byID[a.DeviceID]
		if dev == nil {
			return fmt.Errorf("read devices: device %d of account %d is gone", a.DeviceID, a.ID)
		}
		if a.LinkStatus == LinkLinked && dev.UninstallRequestedAt == nil {
			args, err := json.Marshal(map[string]string{"account_id": models.FormatID(a.ID), "user_name": a.UserName})
			if err != nil {
				return err
			}
			cmds = append(cmds, Command{ID: sqldb.NewID(), OrgID: dev.OrgID, DeviceID: dev.ID, AccountID: &a.ID,
				Type: CmdUnlink, Args: args, Status: CommandPending, CreatedAt: now})
		}
		history = append(history, LinkEvent{ID: sqldb.NewID(), OrgID: orgID, DeviceID: dev.ID, DeviceName: dev.Name,
			AccountID: &a.ID, UserName: a.UserName, IdpUserID: a.IdpUserID, Action: "user_deleted", LinkType: a.LinkType,
			OldState: a.LinkStatus, NewState: LinkUnlinked, Actor: "system", Reason: "the user was deleted", CreatedAt: now})
	}
	if len(cmds) > 0 {
		if _, err := tx.NewInsert().Model(&cmds).Exec(ctx); err != nil {
			return fmt.Errorf("queue commands: %w", err)
		}
	}
	// What unlinkAccount sets, for every account at once.
	if _, err := tx.NewUpdate().Table("device_accounts").
		Set("link_status = ?, link_type = '', idp_user_id = NULL, link_permission_level = ''", LinkUnlinked).
		Set("link_command_id = NULL, linked_at = NULL, updated_at = ?", now).
		Where("id IN (?)", bun.List(accountIDs)).Exec(ctx); err != nil {
		return fmt.Errorf("unlink accounts: %w", err)
	}
	if _, err := tx.NewInsert().Model(&history).Exec(ctx); err != nil {
		return fmt.Errorf("record link history: %w", err)
	}
	if _, err := tx.NewUpdate().Table("devices").
		Set("total_local_accounts = (SELECT count(*) FROM device_accounts AS a WHERE a.device_id = devices.id)").
		Set("linked_local_accounts = (SELECT count(*) FROM device_accounts AS a WHERE a.device_id = devices.id AND a.link_status = ?)", LinkLinked).
		Where("id IN (?)", bun.List(deviceIDs)).Exec(ctx); err != nil {
		return fmt.Errorf("count accounts: %w", err)
	}
	return nil
}
