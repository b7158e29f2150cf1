package protection

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/devices"
	"iam/models/listing"
	"iam/models/sqldb"
)

// DeviceGroup is a named set of devices of an organization, chosen one by one
// (static members). Conditional access policies (device_assignment.group_ids)
// and the offline MFA settings (devices_assignment.group_ids) name device
// groups; the interface names them without defining them (docs/decisions.md).
type DeviceGroup struct {
	bun.BaseModel `bun:"table:device_groups,alias:device_group"`

	ID          int64     `bun:"id,pk"`
	OrgID       int64     `bun:"org_id"`
	Name        string    `bun:"name"`
	NameKey     string    `bun:"name_key"`
	Description string    `bun:"description"`
	CreatedAt   time.Time `bun:"created_at"`
	UpdatedAt   time.Time `bun:"updated_at"`

	// MembersCount counts the members that are not deleted devices; derived
	// by Get and List, not stored.
	MembersCount int64 `bun:"members_count,scanonly"`
}

// DeviceGroupMember is one membership row.
type DeviceGroupMember struct {
	bun.BaseModel `bun:"table:device_group_members"`

	GroupID  int64     `bun:"group_id,pk"`
	DeviceID int64     `bun:"device_id,pk"`
	OrgID    int64     `bun:"org_id"`
	AddedAt  time.Time `bun:"added_at"`
}

// Limits of device groups.
const (
	MaxDeviceGroupNameLen        = 256
	MaxDeviceGroupDescriptionLen = 1024
	// MaxDeviceGroupMembersPerRequest caps the device ids one request adds
	// or removes.
	MaxDeviceGroupMembersPerRequest = 1000
	// MaxDeviceGroupsPerOrg caps an organization's device groups.
	MaxDeviceGroupsPerOrg = 10000
)

// ErrDeviceGroupNotFound answers a device group not in the organization.
var ErrDeviceGroupNotFound = models.NotFound("Device Group", "the device group does not exist")

// DeviceGroupListing is the allow-list of GET /protection/device-groups:
// offset paging, by name.
var DeviceGroupListing = listing.MustSchema(listing.Schema{
	Name:   "device_groups",
	Paging: listing.OffsetPaging,
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "name", Column: "name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "description", Column: "description", Type: listing.TypeString, Filter: true},
		{Name: "members_count", Column: "members_count", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "created_time", Column: "created_at", Type: listing.TypeTime, Filter: true, Sort: true},
		{Name: "last_modified_time", Column: "updated_at", Type: listing.TypeTime, Filter: true, Sort: true},
	},
	DefaultSort: "name",
})

// DeviceGroupMemberListing is the allow-list of a device group's members:
// offset paging, by name.
var DeviceGroupMemberListing = listing.MustSchema(listing.Schema{
	Name:   "device_group_members",
	Paging: listing.OffsetPaging,
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "name", Column: "name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "os_type", Column: "os_type", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "join_type", Column: "join_type", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "added_time", Column: "added_at", Type: listing.TypeTime, Filter: true, Sort: true},
	},
	DefaultSort: "name",
})

// DeviceGroupStore keeps device groups and their members.
type DeviceGroupStore struct{ db bun.IDB }

// NewDeviceGroupStore returns the DeviceGroupStore over db (the database or a transaction).
func NewDeviceGroupStore(db bun.IDB) *DeviceGroupStore { return &DeviceGroupStore{db: db} }

// deviceGroupView is the derived table reads use: the organization's groups
// with their members_count (deleted devices not counted).
func deviceGroupView(orgID int64) (string, []any) {
	return "(SELECT device_groups.*, (SELECT count(*) FROM device_group_members m JOIN devices d ON d.id = m.device_id " +
		"AND d.deleted_at IS NULL WHERE m.group_id = device_groups.id) AS members_count " +
		"FROM device_groups WHERE org_id = ?) AS device_group", []any{orgID}
}

// checkDeviceGroup trims and checks name and description.
func checkDeviceGroup(g *DeviceGroup) error {
	g.Name = strings.TrimSpace(g.Name)
	switch {
	case g.Name == "":
		return models.Invalid("name", "is required")
	case !utf8.ValidString(g.Name) || utf8.RuneCountInString(g.Name) > MaxDeviceGroupNameLen:
		return models.Invalid("name", "must be text of at most %d characters", MaxDeviceGroupNameLen)
	case !utf8.ValidString(g.Description) || utf8.RuneCountInString(g.Description) > MaxDeviceGroupDescriptionLen:
		return models.Invalid("description", "must be text of at most %d characters", MaxDeviceGroupDescriptionLen)
	}
	g.NameKey = strings.ToLower(g.Name)
	return nil
}

func errDeviceGroupNameTaken(name string) error {
	return &models.Error{Code: models.ECONFLICT, Title: "Device Group Exists", Field: "name",
		Detail: fmt.Sprintf("a device group named %q exists already", name)}
}

// Create stores a new device group with its first members (devices of the
// organization; EINVALID naming those that are not). ECONFLICT when the name
// (ignoring case) is taken.
func (s *DeviceGroupStore) Create(ctx context.Context, g *DeviceGroup, deviceIDs []int64) error {
	if err := checkDeviceGroup(g); err != nil {
		return err
	}
	ids, err := checkDeviceMemberIDs(deviceIDs)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	g.ID, g.CreatedAt, g.UpdatedAt = sqldb.NewID(), now, now
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		n, err := tx.NewSelect().Model((*DeviceGroup)(nil)).Where("org_id = ?", g.OrgID).Count(ctx)
		if err != nil {
			return fmt.Errorf("count device groups: %w", err)
		}
		if n >= MaxDeviceGroupsPerOrg {
			return models.Errorf(models.ECONFLICT, "an organization has at most %d device groups", MaxDeviceGroupsPerOrg)
		}
		if _, err = tx.NewInsert().Model(g).Exec(ctx); err != nil {
			if sqldb.IsUniqueViolation(err) {
				return errDeviceGroupNameTaken(g.Name)
			}
			return fmt.Errorf("insert device group: %w", err)
		}
		if err = record(ctx, g.OrgID, audit.DeviceGroupCreated, deviceGroupTarget(g)); err != nil {
			return err
		}
		added, err := addDeviceGroupMembers(ctx, tx, g, ids, now)
		if err != nil {
			return err
		}
		g.MembersCount = int64(len(added))
		if err = recordMembers(ctx, tx, g, audit.DeviceGroupMembersAdded, added); err != nil {
			return err
		}
		return BumpProtectionVersion(ctx, tx, g.OrgID)
	})
}

// checkDeviceMemberIDs removes duplicates and caps the count.
func checkDeviceMemberIDs(ids []int64) ([]int64, error) {
	if len(ids) > MaxDeviceGroupMembersPerRequest {
		return nil, models.Invalid("device_ids", "at most %d devices a request", MaxDeviceGroupMembersPerRequest)
	}
	seen := make(map[int64]bool, len(ids))
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// existingDevices returns which of ids are devices of the organization that
// are not deleted.
func existingDevices(ctx context.Context, db bun.IDB, orgID int64, ids []int64) (map[int64]bool, error) {
	found := map[int64]bool{}
	if len(ids) == 0 {
		return found, nil
	}
	var rows []int64
	err := db.NewSelect().Table("devices").Column("id").
		Where("org_id = ? AND deleted_at IS NULL AND id IN (?)", orgID, bun.List(ids)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("select devices: %w", err)
	}
	for _, id := range rows {
		found[id] = true
	}
	return found, nil
}

// missingIDs names the ids not in found, for an error.
func missingIDs(ids []int64, found map[int64]bool) []string {
	var out []string
	for _, id := range ids {
		if !found[id] {
			out = append(out, models.FormatID(id))
		}
	}
	return out
}

// addDeviceGroupMembers adds the devices ids (of the organization; EINVALID
// naming those that are not) to g and returns those that were not members
// already, ascending.
func addDeviceGroupMembers(ctx context.Context, tx bun.Tx, g *DeviceGroup, ids []int64, now time.Time) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	found, err := existingDevices(ctx, tx, g.OrgID, ids)
	if err != nil {
		return nil, err
	}
	if miss := missingIDs(ids, found); len(miss) > 0 {
		return nil, models.Invalid("device_ids", "no such devices in the organization: %s", strings.Join(miss, ", "))
	}
	rows := make([]DeviceGroupMember, len(ids))
	for i, id := range ids {
		rows[i] = DeviceGroupMember{GroupID: g.ID, DeviceID: id, OrgID: g.OrgID, AddedAt: now}
	}
	var added []int64
	err = tx.NewInsert().Model(&rows).On("CONFLICT (group_id, device_id) DO NOTHING").Returning("device_id").Scan(ctx, &added)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("insert device group members: %w", err)
	}
	slices.Sort(added)
	return added, nil
}

// recordMembers records an event of type typ (members added or removed)
// naming g, then the devices ids, when there are any.
func recordMembers(ctx context.Context, tx bun.Tx, g *DeviceGroup, typ string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	names := make(map[int64]string, len(ids))
	for start := 0; start < len(ids); start += 1000 {
		var rows []struct {
			ID   int64  `bun:"id"`
			Name string `bun:"name"`
		}
		part := ids[start:min(start+1000, len(ids))]
		if err := tx.NewSelect().Table("devices").Column("id", "name").Where("org_id = ? AND id IN (?)", g.OrgID, bun.List(part)).
			Scan(ctx, &rows); err != nil {
			return fmt.Errorf("select device names: %w", err)
		}
		for _, r := range rows {
			names[r.ID] = r.Name
		}
	}
	targets := make([]models.EventTarget, len(ids))
	for i, id := range ids {
		targets[i] = audit.Target(devices.DeviceTargetType, id, names[id])
	}
	main := deviceGroupTarget(g)
	return recordBulk(ctx, g.OrgID, typ, &main, targets)
}

// Get returns one device group of the organization. ENOTFOUND when missing.
func (s *DeviceGroupStore) Get(ctx context.Context, orgID, id int64) (*DeviceGroup, error) {
	return getDeviceGroup(ctx, s.db, orgID, id)
}

func getDeviceGroup(ctx context.Context, db bun.IDB, orgID, id int64) (*DeviceGroup, error) {
	g := new(DeviceGroup)
	view, args := deviceGroupView(orgID)
	err := db.NewSelect().Model(g).ModelTableExpr(view, args...).ColumnExpr("device_group.*").
		Where("device_group.id = ?", id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrDeviceGroupNotFound
	}
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("select device group: %w", err))
	}
	return g, nil
}

// List returns a page of the organization's device groups.
func (s *DeviceGroupStore) List(ctx context.Context, orgID int64, p listing.Params) ([]DeviceGroup, listing.Meta, error) {
	out := []DeviceGroup{}
	view, args := deviceGroupView(orgID)
	q := s.db.NewSelect().Model(&out).ModelTableExpr(view, args...).ColumnExpr("device_group.*")
	meta, err := listing.Fetch(ctx, q, &out, DeviceGroupListing, p)
	if err != nil {
		return nil, meta, models.Unavailable(fmt.Errorf("list device groups: %w", err))
	}
	return out, meta, nil
}

// DeviceGroupChange is a PATCH of a device group: nil fields stay.
type DeviceGroupChange struct {
	Name        *string
	Description *string
}

// Update changes name or description. ENOTFOUND, EINVALID, ECONFLICT.
func (s *DeviceGroupStore) Update(ctx context.Context, orgID, id int64, ch DeviceGroupChange) (*DeviceGroup, error) {
	var out *DeviceGroup
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		g, err := getDeviceGroup(ctx, tx, orgID, id)
		if err != nil {
			return err
		}
		before := deviceGroupAudit{Name: g.Name, Description: g.Description}
		if ch.Name != nil {
			g.Name = *ch.Name
		}
		if ch.Description != nil {
			g.Description = *ch.Description
		}
		if err = checkDeviceGroup(g); err != nil {
			return err
		}
		g.UpdatedAt = time.Now().UTC()
		_, err = tx.NewUpdate().Model(g).Column("name", "name_key", "description", "updated_at").
			Where("id = ? AND org_id = ?", id, orgID).Exec(ctx)
		if sqldb.IsUniqueViolation(err) {
			return errDeviceGroupNameTaken(g.Name)
		}
		if err != nil {
			return fmt.Errorf("update device group: %w", err)
		}
		t := deviceGroupTarget(g)
		t.Changes = audit.Changes(before, deviceGroupAudit{Name: g.Name, Description: g.Description})
		if err := record(ctx, orgID, audit.DeviceGroupUpdated, t); err != nil {
			return err
		}
		out = g
		return nil
	})
	return out, err
}

// Delete removes a device group and its memberships. Policies and settings
// that name it keep the id, which then matches no device. ENOTFOUND.
func (s *DeviceGroupStore) Delete(ctx context.Context, orgID, id int64) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		var names []string
		err := tx.NewDelete().Model((*DeviceGroup)(nil)).Where("org_id = ? AND id = ?", orgID, id).Returning("name").Scan(ctx, &names)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delete device group: %w", err)
		}
		if len(names) == 0 {
			return ErrDeviceGroupNotFound
		}
		if err := record(ctx, orgID, audit.DeviceGroupDeleted, audit.Target(DeviceGroupTargetType, id, names[0])); err != nil {
			return err
		}
		return BumpProtectionVersion(ctx, tx, orgID)
	})
}

// AddMembers adds devices of the organization to the group (EINVALID naming
// those that are not; members already in stay). It returns the group.
func (s *DeviceGroupStore) AddMembers(ctx context.Context, orgID, id int64, deviceIDs []int64) (*DeviceGroup, error) {
	ids, err := checkDeviceMemberIDs(deviceIDs)
	if err != nil {
		return nil, err
	}
	var out *DeviceGroup
	if err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		g, err := getDeviceGroup(ctx, tx, orgID, id)
		if err != nil {
			return err
		}
		added, err := addDeviceGroupMembers(ctx, tx, g, ids, time.Now().UTC())
		if err != nil {
			return err
		}
		if err = recordMembers(ctx, tx, g, audit.DeviceGroupMembersAdded, added); err != nil {
			return err
		}
		out, err = touchDeviceGroup(ctx, tx, g)
		return err
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// RemoveMembers removes devices from the group; ids that are not members
// are ignored. It returns the group.
func (s *DeviceGroupStore) RemoveMembers(ctx context.Context, orgID, id int64, deviceIDs []int64) (*DeviceGroup, error) {
	ids, err := checkDeviceMemberIDs(deviceIDs)
	if err != nil {
		return nil, err
	}
	var out *DeviceGroup
	if err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		g, err := getDeviceGroup(ctx, tx, orgID, id)
		if err != nil {
			return err
		}
		var removed []int64
		if len(ids) > 0 {
			err = tx.NewDelete().Model((*DeviceGroupMember)(nil)).
				Where("group_id = ? AND device_id IN (?)", g.ID, bun.List(ids)).Returning("device_id").Scan(ctx, &removed)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("delete device group members: %w", err)
			}
		}
		slices.Sort(removed)
		if err = recordMembers(ctx, tx, g, audit.DeviceGroupMembersRemoved, removed); err != nil {
			return err
		}
		out, err = touchDeviceGroup(ctx, tx, g)
		return err
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// touchDeviceGroup sets updated_at and reads the group again.
func touchDeviceGroup(ctx context.Context, tx bun.Tx, g *DeviceGroup) (*DeviceGroup, error) {
	if _, err := tx.NewUpdate().Model((*DeviceGroup)(nil)).Set("updated_at = ?", time.Now().UTC()).
		Where("id = ?", g.ID).Exec(ctx); err != nil {
		return nil, fmt.Errorf("touch device group: %w", err)
	}
	return getDeviceGroup(ctx, tx, g.OrgID, g.ID)
}

// DeviceGroupMemberRow is a member as the members list shows it.
type DeviceGroupMemberRow struct {
	bun.BaseModel `bun:"table:devices,alias:member"`

	ID       int64     `bun:"id"`
	Name     string    `bun:"name"`
	OSType   string    `bun:"os_type"`
	JoinType string    `bun:"join_type"`
	AddedAt  time.Time `bun:"added_at"`
}

// Members returns a page of the group's devices (not deleted ones).
// ENOTFOUND when the group is not in the organization.
func (s *DeviceGroupStore) Members(ctx context.Context, orgID, id int64, p listing.Params) ([]DeviceGroupMemberRow, listing.Meta, error) {
	if _, err := getDeviceGroup(ctx, s.db, orgID, id); err != nil {
		return nil, nil, err
	}
	out := []DeviceGroupMemberRow{}
	q := s.db.NewSelect().Model(&out).ModelTableExpr(
		"(SELECT d.id, d.name, d.os_type, d.join_type, m.added_at FROM device_group_members m "+
			"JOIN devices d ON d.id = m.device_id AND d.deleted_at IS NULL WHERE m.group_id = ? AND m.org_id = ?) AS member", id, orgID).
		ColumnExpr("member.*")
	meta, err := listing.Fetch(ctx, q, &out, DeviceGroupMemberListing, p)
	if err != nil {
		return nil, meta, models.Unavailable(fmt.Errorf("list device group members: %w", err))
	}
	return out, meta, nil
}

// MissingGroups returns the ids among ids that are not device groups of the
// organization, in the order given (empty when all exist). Policies and the
// offline MFA settings check the device groups they name with it.
func (s *DeviceGroupStore) MissingGroups(ctx context.Context, orgID int64, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []int64
	err := s.db.NewSelect().Model((*DeviceGroup)(nil)).Column("id").
		Where("org_id = ? AND id IN (?)", orgID, bun.List(ids)).Scan(ctx, &rows)
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("select device groups: %w", err))
	}
	found := make(map[int64]bool, len(rows))
	for _, id := range rows {
		found[id] = true
	}
	var miss []int64
	for _, id := range ids {
		if !found[id] {
			miss = append(miss, id)
		}
	}
	return miss, nil
}

// MissingDevices returns the ids among ids that are not devices of the
// organization (deleted ones count as missing), in the order given.
func (s *DeviceGroupStore) MissingDevices(ctx context.Context, orgID int64, ids []int64) ([]int64, error) {
	found, err := existingDevices(ctx, s.db, orgID, ids)
	if err != nil {
		return nil, models.Unavailable(err)
	}
	var miss []int64
	for _, id := range ids {
		if !found[id] {
			miss = append(miss, id)
		}
	}
	return miss, nil
}

// GroupsOfDevice returns the ids of the device groups the device belongs to,
// ascending. A device of another organization belongs to none.
func (s *DeviceGroupStore) GroupsOfDevice(ctx context.Context, orgID, deviceID int64) ([]int64, error) {
	ids := []int64{}
	err := s.db.NewSelect().Model((*DeviceGroupMember)(nil)).Column("group_id").
		Where("device_id = ? AND org_id = ?", deviceID, orgID).OrderExpr("group_id").Scan(ctx, &ids)
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("select groups of device: %w", err))
	}
	return ids, nil
}

// BumpProtectionVersion advances the organization's protection version
// inside tx: every change to what conditional access decisions read
// (policies, condition configs, device groups) calls it, so that cached
// decision snapshots (ProtectionVersion) know they are stale.
func BumpProtectionVersion(ctx context.Context, tx bun.IDB, orgID int64) error {
	_, err := tx.NewRaw("INSERT INTO protection_versions (org_id, version) VALUES (?, 1) "+
		"ON CONFLICT (org_id) DO UPDATE SET version = protection_versions.version + 1", orgID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("bump protection version: %w", err)
	}
	return nil
}

// ProtectionVersion returns the organization's protection version (0 before
// any change).
func (s *DeviceGroupStore) ProtectionVersion(ctx context.Context, orgID int64) (int64, error) {
	var v []int64
	err := s.db.NewRaw("SELECT version FROM protection_versions WHERE org_id = ?", orgID).Scan(ctx, &v)
	if err != nil {
		return 0, models.Unavailable(fmt.Errorf("select protection version: %w", err))
	}
	if len(v) == 0 {
		return 0, nil
	}
	return v[0], nil
}

// DecisionFacts is what a decision reads besides its cached snapshot.
type DecisionFacts struct {
	UserExists bool
	UserGroups []int64 // static and dynamic memberships, ascending
	// DeviceExists: the device asked about is of the organization and not
	// deleted (false when none was asked about).
	DeviceExists bool
	DeviceGroups []int64 // ascending
	Version      int64   // the organization's protection version
}

// DecisionFacts reads, in one query, the organization's protection
// version, whether userID is a user of the organization and its groups,
// and, when deviceID is not 0, whether it is a device of the organization
// and its device groups.
func (s *DeviceGroupStore) DecisionFacts(ctx context.Context, orgID, userID, deviceID int64) (DecisionFacts, error) {
	var rows []struct {
		Kind    string `bun:"kind"`
		ID      *int64 `bun:"id"`
		GroupID *int64 `bun:"group_id"`
	}
	err := s.db.NewRaw("SELECT 'v' AS kind, pv.version AS id, CAST(NULL AS BIGINT) AS group_id FROM protection_versions AS pv WHERE pv.org_id = ? "+
		"UNION ALL SELECT 'u', u.id, gm.group_id FROM users AS u LEFT JOIN group_members AS gm ON gm.user_id = u.id AND gm.org_id = u.org_id "+
		"WHERE u.org_id = ? AND u.id = ? "+
		"UNION ALL SELECT 'd', d.id, m.group_id FROM devices AS d LEFT JOIN device_group_members AS m ON m.device_id = d.id "+
		"WHERE d.org_id = ? AND d.id = ? AND d.deleted_at IS NULL ORDER BY 1, 3",
		orgID, orgID, userID, orgID, deviceID).Scan(ctx, &rows)
	if err != nil {
		return DecisionFacts{}, models.Unavailable(fmt.Errorf("select decision facts: %w", err))
	}
	f := DecisionFacts{UserGroups: []int64{}, DeviceGroups: []int64{}}
	for _, r := range rows {
		switch r.Kind {
		case "v":
			if r.ID != nil {
				f.Version = *r.ID
			}
		case "u":
			f.UserExists = true
			if r.GroupID != nil {
				f.UserGroups = append(f.UserGroups, *r.GroupID)
			}
		case "d":
			f.DeviceExists = deviceID != 0
			if r.GroupID != nil {
				f.DeviceGroups = append(f.DeviceGroups, *r.GroupID)
			}
		}
	}
	return f, nil
}
