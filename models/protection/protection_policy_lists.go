package protection

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/devices"
	"iam/models/identity"
	"iam/models/listing"
)

// PolicyUser is a user assigned to a policy, as its sub-list shows it.
type PolicyUser struct {
	bun.BaseModel `bun:"table:users,alias:u"`

	ID            int64                   `bun:"id,pk"`
	Name          string                  `bun:"display_name"`
	Email         string                  `bun:"email"`
	PrimarySource *identity.PrimarySource `bun:"primary_source,type:json"`
}

// PolicyGroup is a group assigned to a policy, as its sub-list shows it.
type PolicyGroup struct {
	bun.BaseModel `bun:"table:groups,alias:g"`

	ID            int64                   `bun:"id,pk"`
	Name          string                  `bun:"name"`
	IsDynamic     bool                    `bun:"is_dynamic"`
	PrimarySource *identity.PrimarySource `bun:"primary_source,type:json"`
}

// PolicyUserListing, PolicyGroupListing and PolicyDeviceListing are the
// allow-lists of a policy's sub-lists: offset paging, by name.
var (
	PolicyUserListing = listing.MustSchema(listing.Schema{
		Name: "policy_users",
		Attributes: []listing.Attribute{
			{Name: "id", Column: "u.id", Type: listing.TypeID, Filter: true},
			{Name: "name", Column: "u.display_name", Type: listing.TypeString, Filter: true, Sort: true},
			{Name: "email", Column: "u.email", Type: listing.TypeString, Filter: true, Sort: true},
			{Name: "primary_source"},
		},
		DefaultSort: "name", Paging: listing.OffsetPaging,
	})
	PolicyGroupListing = listing.MustSchema(listing.Schema{
		Name: "policy_groups",
		Attributes: []listing.Attribute{
			{Name: "id", Column: "g.id", Type: listing.TypeID, Filter: true},
			{Name: "name", Column: "g.name", Type: listing.TypeString, Filter: true, Sort: true},
			{Name: "is_dynamic", Column: "g.is_dynamic", Type: listing.TypeBoolean, Filter: true},
			{Name: "type"}, {Name: "primary_source"},
		},
		DefaultSort: "name", Paging: listing.OffsetPaging,
	})
	PolicyDeviceListing = listing.MustSchema(listing.Schema{
		Name: "policy_devices",
		Attributes: []listing.Attribute{
			{Name: "id", Column: "id", Type: listing.TypeID, Filter: true},
			{Name: "name", Column: "name", Type: listing.TypeString, Filter: true, Sort: true},
			{Name: "join_type", Column: "join_type", Type: listing.TypeString, Filter: true, Sort: true},
			{Name: "agent_status", Column: "agent_status", Type: listing.TypeString, Filter: true, Sort: true},
			{Name: "primary_source"},
		},
		DefaultSort: "name", Paging: listing.OffsetPaging,
	})
)

// policyExists answers ErrPolicyNotFound for a policy orgID does not have.
func (s *PolicyStore) policyExists(ctx context.Context, orgID, id int64) (*Policy, error) {
	p := new(Policy)
	err := s.db.NewSelect().Model(p).Where("p.org_id = ? AND p.id = ?", orgID, id).Scan(ctx)
	if err != nil {
		if models.IsNoRows(err) {
			return nil, ErrPolicyNotFound
		}
		return nil, fmt.Errorf("select policy: %w", err)
	}
	return p, nil
}

func assigned(kind string, policyID int64) (string, []any) {
	return "IN (SELECT a.target_id FROM ca_policy_assignments AS a WHERE a.policy_id = ? AND a.kind = ?)", []any{policyID, kind}
}

// AssignedUsers returns a page of the users assigned to a policy that
// still exist. ErrPolicyNotFound when orgID has no such policy.
func (s *PolicyStore) AssignedUsers(ctx context.Context, orgID, policyID int64, p listing.Params) ([]PolicyUser, listing.Meta, error) {
	if _, err := s.policyExists(ctx, orgID, policyID); err != nil {
		return nil, nil, err
	}
	out := []PolicyUser{}
	in, args := assigned(assignUser, policyID)
	q := s.db.NewSelect().Model(&out).Where("u.org_id = ?", orgID).Where("u.id "+in, args...)
	meta, err := listing.Fetch(ctx, q, &out, PolicyUserListing, p)
	return out, meta, err
}

// AssignedGroups returns a page of the groups assigned to a policy that
// still exist. ErrPolicyNotFound when orgID has no such policy.
func (s *PolicyStore) AssignedGroups(ctx context.Context, orgID, policyID int64, p listing.Params) ([]PolicyGroup, listing.Meta, error) {
	if _, err := s.policyExists(ctx, orgID, policyID); err != nil {
		return nil, nil, err
	}
	out := []PolicyGroup{}
	in, args := assigned(assignGroup, policyID)
	q := s.db.NewSelect().Model(&out).Where("g.org_id = ?", orgID).Where("g.id "+in, args...)
	meta, err := listing.Fetch(ctx, q, &out, PolicyGroupListing, p)
	return out, meta, err
}

// ProtectedDevices returns a page of the devices a policy's ComputerDevices
// setting protects (not deleted): every device of the organization when it
// selects all devices, else those it names and the members of the device
// groups it names. ErrPolicyNotFound when orgID has no such policy.
func (s *PolicyStore) ProtectedDevices(ctx context.Context, orgID, policyID int64, p listing.Params, versions devices.AgentVersions) ([]devices.Device, listing.Meta, error) {
	pol, err := s.policyExists(ctx, orgID, policyID)
	if err != nil {
		return nil, nil, err
	}
	out := []devices.Device{}
	view, args := devices.DeviceView(orgID, time.Now().UTC(), versions)
	q := s.db.NewSelect().Model(&out).ModelTableExpr(view, args...).ColumnExpr("device.*")
	st := pol.Setting(EndpointComputerDevices)
	switch {
	case st == nil || st.DeviceAssignment == nil:
		q = q.Where("1 = 0")
	case st.DeviceAssignment.AllDevicesGroupSelected:
	default:
		in, args := assigned(assignDevice, policyID)
		where, gargs := protectedByDeviceGroups(policyID)
		q = q.Where("device.id "+in+" OR "+where, append(args, gargs...)...)
	}
	meta, err := listing.Fetch(ctx, q, &out, PolicyDeviceListing, p)
	if err != nil {
		return nil, meta, fmt.Errorf("list protected devices: %w", err)
	}
	return out, meta, nil
}

// protectedByDeviceGroups is the condition on device.id for the members of
// the device groups a policy names.
func protectedByDeviceGroups(policyID int64) (string, []any) {
	return "device.id IN (SELECT m.device_id FROM device_group_members AS m WHERE m.group_id IN " +
		"(SELECT a.target_id FROM ca_policy_assignments AS a WHERE a.policy_id = ? AND a.kind = ?))", []any{policyID, assignDeviceGroup}
}
