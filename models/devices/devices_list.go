package devices

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/identity"
	"iam/models/listing"
)

// DeviceListing is the allow-list of GET /devices: cursor paging, id order
// by default. agent_status and is_agent_outdated are derived (from the
// contact time and the current agent versions) but filter and sort like
// columns.
var DeviceListing = listing.MustSchema(listing.Schema{
	Name:   "devices",
	Paging: listing.CursorPaging,
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "name", Column: "name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "os_type", Column: "os_type", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "agent_status", Column: "agent_status", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "join_type", Column: "join_type", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "serial_number", Column: "serial_number", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "ip_address", Column: "ip_address", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "domain", Column: "domain", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "is_agent_outdated", Column: "is_agent_outdated", Type: listing.TypeBoolean, Filter: true, Sort: true},
		{Name: "last_contact_time", Column: "last_contact_time", Type: listing.TypeTime, Filter: true},
		{Name: "date_added", Column: "date_added", Type: listing.TypeTime, Filter: true, Sort: true},
		{Name: "agent_version", Column: "agent_version", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "os_distribution"}, {Name: "os_major_version"}, {Name: "os_release_name"}, {Name: "os_build_version"},
		{Name: "agent_installed_time"}, {Name: "is_deactivated"}, {Name: "device_accounts"},
		{Name: "tenant"}, {Name: "dns_hostname"}, {Name: "container"}, {Name: "managed_by"}, {Name: "owner"},
		{Name: "mdm"}, {Name: "description"}, {Name: "possible_duplicate_of"},
	},
})

// AgentVersions are the current agent versions by platform (windows,
// macos, linux); a device whose agent_version differs is outdated.
type AgentVersions map[string]string

// Outdated says whether a device's agent is not the current version of its
// platform (never when no current version is known).
func (v AgentVersions) Outdated(d *Device) bool {
	cur := v[d.Platform]
	return cur != "" && d.AgentVersion != cur
}

// DeviceView is the derived table lists read: the organization's devices
// that are not deleted, with agent_status and is_agent_outdated.
func DeviceView(orgID int64, now time.Time, versions AgentVersions) (string, []any) {
	args := []any{AgentInactive, AgentPending, now, AgentInactive, AgentActive}
	outdated := []string{}
	for _, p := range DevicePlatforms {
		if v := versions[p]; v != "" {
			outdated = append(outdated, "(platform = ? AND agent_version <> ?)")
			args = append(args, p, v)
		}
	}
	if len(outdated) == 0 {
		outdated = append(outdated, "1 = 0")
	}
	args = append(args, orgID)
	return "(SELECT devices.*, CASE WHEN uninstall_requested_at IS NOT NULL THEN ? WHEN last_contact_time IS NULL THEN ? " +
		"WHEN inactive_after < ? THEN ? ELSE ? END AS agent_status, (" + strings.Join(outdated, " OR ") + ") AS is_agent_outdated " +
		"FROM devices WHERE org_id = ? AND deleted_at IS NULL) AS device", args
}

// List returns a page of the organization's devices (not those deleted).
func (s *DeviceStore) List(ctx context.Context, orgID int64, p listing.Params, versions AgentVersions) ([]Device, listing.Meta, error) {
	devices := []Device{}
	view, args := DeviceView(orgID, time.Now().UTC(), versions)
	q := s.db.NewSelect().Model(&devices).ModelTableExpr(view, args...).ColumnExpr("device.*")
	meta, err := listing.Fetch(ctx, q, &devices, DeviceListing, p)
	if err != nil {
		return nil, meta, models.Unavailable(fmt.Errorf("list devices: %w", err))
	}
	return devices, meta, nil
}

// LocalAccountListing is the allow-list of GET /devices/{id}/accounts:
// offset paging, by user name.
var LocalAccountListing = listing.MustSchema(listing.Schema{
	Name:        "device_accounts",
	Paging:      listing.OffsetPaging,
	DefaultSort: "user_name",
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "user_name", Column: "user_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "permission_level", Column: "permission_level", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "last_login", Column: "last_login", Type: listing.TypeTime, Filter: true},
		{Name: "link_status", Column: "link_status", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "idp_user_id", Column: "idp_user_id", Type: listing.TypeID, Filter: true},
		{Name: "is_idp_linked"}, {Name: "idp_user_details"},
	},
})

// ListAccounts returns a page of a device's local accounts. ENOTFOUND
// (Device Not Found) for an unknown device.
func (s *DeviceStore) ListAccounts(ctx context.Context, orgID, deviceID int64, p listing.Params) ([]LocalAccount, listing.Meta, error) {
	if _, err := s.Get(ctx, orgID, deviceID); err != nil {
		return nil, nil, err
	}
	out := []LocalAccount{}
	q := s.db.NewSelect().Model(&out).Where("device_id = ?", deviceID)
	meta, err := listing.Fetch(ctx, q, &out, LocalAccountListing, p)
	if err != nil {
		return nil, meta, models.Unavailable(fmt.Errorf("list accounts: %w", err))
	}
	return out, meta, nil
}

// OfflineUserListing is the allow-list of GET /devices/{id}/offline-enrolled-users.
var OfflineUserListing = listing.MustSchema(listing.Schema{
	Name:   "device_offline_users",
	Paging: listing.OffsetPaging,
	Key:    "user_id",
	Attributes: []listing.Attribute{
		{Name: "id", Column: "user_id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "display_name", Column: "display_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "user_name", Column: "user_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "sam_account_name", Column: "sam_account_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "local_account_name", Column: "local_account_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "enrolled_time", Column: "enrolled_time", Type: listing.TypeTime, Filter: true},
		{Name: "primary_source"}, {Name: "enrolled_authenticators"},
	},
})

// ListOfflineUsers returns a page of a device's offline-enrolled users (not
// those whose removal is under way). ENOTFOUND for an unknown device.
func (s *DeviceStore) ListOfflineUsers(ctx context.Context, orgID, deviceID int64, p listing.Params) ([]OfflineUser, listing.Meta, error) {
	if _, err := s.Get(ctx, orgID, deviceID); err != nil {
		return nil, nil, err
	}
	out := []OfflineUser{}
	q := s.db.NewSelect().Model(&out).Where("device_id = ? AND removal_command_id IS NULL", deviceID)
	meta, err := listing.Fetch(ctx, q, &out, OfflineUserListing, p)
	if err != nil {
		return nil, meta, models.Unavailable(fmt.Errorf("list offline users: %w", err))
	}
	return out, meta, nil
}

// UserNames returns the id, email and display name of the organization's
// users among ids, for idp_user_details.
func (s *DeviceStore) UserNames(ctx context.Context, orgID int64, ids []int64) (map[int64]identity.User, error) {
	out := map[int64]identity.User{}
	if len(ids) == 0 {
		return out, nil
	}
	var users []identity.User
	if err := s.db.NewSelect().Model(&users).Column("id", "email", "display_name", "first_name", "last_name").
		Where("org_id = ? AND id IN (?)", orgID, bun.List(ids)).Scan(ctx); err != nil {
		return nil, models.Unavailable(fmt.Errorf("read users: %w", err))
	}
	for _, u := range users {
		out[u.ID] = u
	}
	return out, nil
}

// LinkHistoryListing is the allow-list of GET /device-account-linking/history:
// offset paging, newest first.
var LinkHistoryListing = listing.MustSchema(listing.Schema{
	Name:        "device_link_history",
	Paging:      listing.OffsetPaging,
	DefaultSort: "-created_at",
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "device_id", Column: "device_id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "device_name", Column: "device_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "account_id", Column: "account_id", Type: listing.TypeID, Filter: true},
		{Name: "user_name", Column: "user_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "idp_user_id", Column: "idp_user_id", Type: listing.TypeID, Filter: true},
		{Name: "action", Column: "action", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "link_type", Column: "link_type", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "old_state", Column: "old_state", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "new_state", Column: "new_state", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "actor", Column: "actor", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "job_id", Column: "job_id", Type: listing.TypeID, Filter: true},
		{Name: "created_at", Column: "created_at", Type: listing.TypeTime, Filter: true, Sort: true},
		{Name: "reason"},
	},
})

// ListHistory returns a page of the organization's link history.
func (s *DeviceStore) ListHistory(ctx context.Context, orgID int64, p listing.Params) ([]LinkEvent, listing.Meta, error) {
	out := []LinkEvent{}
	q := s.db.NewSelect().Model(&out).Where("org_id = ?", orgID)
	meta, err := listing.Fetch(ctx, q, &out, LinkHistoryListing, p)
	if err != nil {
		return nil, meta, models.Unavailable(fmt.Errorf("list link history: %w", err))
	}
	return out, meta, nil
}
