package devices

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/identity"
)

// The audit events of the devices area (docs/audit.md): each store method
// that changes state records its event in its transaction (models.Record).
// An unchanged check-in records none, and a sync job's links stay in the
// job's results.

// Target types of the devices area's events.
const (
	DeviceTargetType          = "device"
	LocalAccountTargetType    = "local_account"
	OfflineUserTargetType     = "offline_user"
	InstallationTargetType    = "agent_installation"
	InstallKeyTargetType      = "agent_install_key"
	LinkingSettingsTargetType = "device_account_linking_settings"
)

// maxTargetsPerEvent caps the targets of one event: a bulk change past it
// is recorded as several events of its type.
const maxTargetsPerEvent = 1000

func deviceTarget(d *Device) models.EventTarget { return audit.Target(DeviceTargetType, d.ID, d.Name) }

func accountTarget(a *LocalAccount) models.EventTarget {
	return audit.Target(LocalAccountTargetType, a.ID, a.UserName)
}

// linkState is what a link changes of a local account, as its event's
// changes show it.
type linkState struct {
	LinkStatus      string `json:"link_status"`
	LinkType        string `json:"link_type"`
	IdpUserID       string `json:"idp_user_id"`
	PermissionLevel string `json:"permission_level"`

	user int64 // the user linked or pending, 0 for none
}

func linkStateOf(a *LocalAccount) linkState {
	s := linkState{LinkStatus: a.LinkStatus, LinkType: a.LinkType, PermissionLevel: a.LinkPermissionLevel}
	if a.IdpUserID != nil {
		s.user = *a.IdpUserID
		s.IdpUserID = models.FormatID(s.user)
	}
	return s
}

// userTarget is the target of the organization's user id, named by its
// display name (its email when it has none); a user deleted meanwhile is
// named by its id alone.
func userTarget(ctx context.Context, db bun.IDB, orgID, id int64) (models.EventTarget, error) {
	var u struct {
		Email       string `bun:"email"`
		DisplayName string `bun:"display_name"`
	}
	err := db.NewSelect().Table("users").Column("email", "display_name").Where("id = ? AND org_id = ?", id, orgID).Scan(ctx, &u)
	if err != nil && !models.IsNoRows(err) {
		return models.EventTarget{}, fmt.Errorf("read user: %w", err)
	}
	name := u.DisplayName
	if name == "" {
		name = u.Email
	}
	return audit.Target(identity.UserTargetType, id, name), nil
}

// recordLink records an event of type typ about the link of account a of
// device d (its state before the change in before): the account (with the
// link's changes), the device and, when the link names one, the user.
func recordLink(ctx context.Context, tx bun.IDB, typ string, d *Device, before linkState, a *LocalAccount, result, reason string) error {
	after := linkStateOf(a)
	acc := accountTarget(a)
	acc.Changes = audit.Changes(before, after)
	targets := []models.EventTarget{acc, deviceTarget(d)}
	uid := before.user
	if after.user != 0 {
		uid = after.user
	}
	if uid != 0 {
		u, err := userTarget(ctx, tx, d.OrgID, uid)
		if err != nil {
			return err
		}
		targets = append(targets, u)
	}
	return models.Record(ctx, models.AuditEvent{OrgID: d.OrgID, Type: typ, Targets: targets, Result: result, Reason: reason})
}

// recordBulk records one change of type typ on the main target and others:
// one event, or several of at most maxTargetsPerEvent targets each, the
// main target first in each.
func recordBulk(ctx context.Context, orgID int64, typ string, main models.EventTarget, others []models.EventTarget) error {
	per := maxTargetsPerEvent - 1
	for start := 0; start == 0 || start < len(others); start += per {
		part := others[start:min(start+per, len(others))]
		targets := make([]models.EventTarget, 0, len(part)+1)
		targets = append(append(targets, main), part...)
		if err := models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: typ, Targets: targets}); err != nil {
			return err
		}
	}
	return nil
}
