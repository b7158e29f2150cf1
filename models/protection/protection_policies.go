package protection

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/listing"
	"iam/models/sqldb"
)

// ErrPolicyNotFound answers a policy id the organization does not have.
var ErrPolicyNotFound = models.NotFound("Policy", "the policy does not exist")

// Assignment kinds of ca_policy_assignments.
const (
	assignUser        = "user"
	assignGroup       = "group"
	assignDevice      = "device"
	assignDeviceGroup = "device_group"
)

// PolicyActor is who writes a policy: a user, or a client of its own.
type PolicyActor struct {
	UserID   int64
	ClientID string
}

// PolicyStore holds the conditional access policies.
type PolicyStore struct{ db bun.IDB }

// NewPolicyStore returns the PolicyStore over db (the database or a transaction).
func NewPolicyStore(db bun.IDB) *PolicyStore { return &PolicyStore{db: db} }

// PolicyListing is the allow-list of GET /protection/conditional-access-policies:
// offset paging, in priority order.
var PolicyListing = listing.MustSchema(listing.Schema{
	Name: "conditional_access_policies",
	Attributes: []listing.Attribute{
		{Name: "id", Column: "p.id", Type: listing.TypeID, Filter: true},
		{Name: "display_name", Column: "p.name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "description", Column: "p.description", Type: listing.TypeString, Filter: true},
		{Name: "is_enabled", Column: "p.is_enabled", Type: listing.TypeBoolean, Filter: true},
		{Name: "is_default_policy", Column: "p.is_default", Type: listing.TypeBoolean, Filter: true},
		{Name: "priority", Column: "p.priority", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "access_type", Column: "p.access_type", Type: listing.TypeString, Filter: true},
		{Name: "last_modified_time", Column: "p.updated_at", Type: listing.TypeTime, Filter: true, Sort: true},
		{Name: "last_modified_user", Column: "p.updated_by_name", Type: listing.TypeString, Filter: true},
		{Name: "endpoints"}, {Name: "is_agent_required"},
	},
	DefaultSort: "priority",
	Paging:      listing.OffsetPaging,
})

// ensureDefault returns the organization's default policy, locked in tx,
// creating it first when missing. The partial unique index on the default
// flag makes concurrent creators agree on one row. Every write to an
// organization's policies locks this row first, so writes take turns.
func (s *PolicyStore) ensureDefault(ctx context.Context, tx bun.IDB, orgID int64) (*Policy, error) {
	for attempt := 0; attempt < 2; attempt++ {
		d := new(Policy)
		err := sqldb.DialectOf(tx).LockRows(tx.NewSelect().Model(d).Where("p.org_id = ? AND p.is_default", orgID), "UPDATE").Scan(ctx)
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("select default policy: %w", err)
		}
		var n int
		if err = tx.NewSelect().Model((*Policy)(nil)).ColumnExpr("COUNT(*)").Where("org_id = ?", orgID).Scan(ctx, &n); err != nil {
			return nil, fmt.Errorf("count policies: %w", err)
		}
		def := NewDefaultPolicy(orgID)
		def.Priority = int64(n) + 1
		res, err := tx.NewInsert().Model(def).On("CONFLICT DO NOTHING").Exec(ctx)
		if err != nil {
			return nil, fmt.Errorf("insert default policy: %w", err)
		}
		// Only the creator bumps the version: a loser of the race that
		// locked the version row here, then waited for the default row
		// locked by a writer that next bumps the version, would deadlock.
		inserted, err := res.RowsAffected()
		if err != nil {
			return nil, fmt.Errorf("insert default policy: %w", err)
		}
		if inserted == 1 {
			if err = record(ctx, orgID, audit.PolicyCreated, policyTarget(def)); err != nil {
				return nil, err
			}
			if err = BumpProtectionVersion(ctx, tx, orgID); err != nil {
				return nil, err
			}
		}
	}
	return nil, fmt.Errorf("default policy of organization %d: not found after insert", orgID)
}

// NewDefaultPolicy returns the default policy an organization starts with:
// enabled, allow, every endpoint signing in with a password and no MFA,
// every device protected for every device action.
func NewDefaultPolicy(orgID int64) *Policy {
	now := time.Now().UTC()
	p := &Policy{ID: sqldb.NewID(), OrgID: orgID, Name: DefaultPolicyName, Description: "Applies when no other policy does.",
		IsEnabled: true, IsDefault: true, AccessType: AccessAllow, CreatedAt: now, UpdatedAt: now}
	for _, e := range Endpoints {
		s := EndpointSetting{Endpoint: e, Type: EndpointTypes[e][0]}
		if e == EndpointComputerDevices {
			s.Actions = slices.Clone(EndpointActions[EndpointTypeComputerDevices])
			s.DeviceAssignment = &DeviceAssignment{AllDevicesGroupSelected: true}
		}
		p.EndpointsSettings = append(p.EndpointsSettings, s)
	}
	var pr models.Problems
	checkPolicy(p, &pr) // fills the defaults; the default policy is valid
	if err := pr.Result(); err != nil {
		panic(err)
	}
	return p
}

// List returns a page of the organization's policies, in priority order
// by default. The default policy is created first when missing.
func (s *PolicyStore) List(ctx context.Context, orgID int64, p listing.Params) ([]Policy, listing.Meta, error) {
	if err := s.ensure(ctx, orgID); err != nil {
		return nil, nil, err
	}
	var out []Policy
	meta, err := listing.Fetch(ctx, s.db.NewSelect().Model(&out).Where("p.org_id = ?", orgID), &out, PolicyListing, p)
	return out, meta, err
}

// ensure creates the organization's default policy when missing.
func (s *PolicyStore) ensure(ctx context.Context, orgID int64) error {
	exists, err := s.db.NewSelect().Model((*Policy)(nil)).Where("org_id = ? AND is_default", orgID).Exists(ctx)
	if err != nil {
		return fmt.Errorf("select default policy: %w", err)
	}
	if exists {
		return nil
	}
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		_, err := s.ensureDefault(ctx, tx, orgID)
		return err
	})
}

// Get returns one policy with its conditions and assignments.
// ErrPolicyNotFound otherwise.
func (s *PolicyStore) Get(ctx context.Context, orgID, id int64) (*Policy, error) {
	if err := s.ensure(ctx, orgID); err != nil {
		return nil, err
	}
	return s.get(ctx, s.db, orgID, id)
}

func (s *PolicyStore) get(ctx context.Context, db bun.IDB, orgID, id int64) (*Policy, error) {
	p := new(Policy)
	err := db.NewSelect().Model(p).Where("p.org_id = ? AND p.id = ?", orgID, id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrPolicyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select policy: %w", err)
	}
	list := []Policy{*p}
	if err := loadPolicyDetails(ctx, db, orgID, list); err != nil {
		return nil, err
	}
	return &list[0], nil
}

// loadPolicyDetails fills the conditions, the assignments that still exist
// and the notification template names of policies, in four queries.
func loadPolicyDetails(ctx context.Context, db bun.IDB, orgID int64, policies []Policy) error {
	if len(policies) == 0 {
		return nil
	}
	ids := make([]int64, len(policies))
	at := make(map[int64]int, len(policies))
	for i := range policies {
		ids[i], at[policies[i].ID] = policies[i].ID, i
		policies[i].Conditions, policies[i].UserIDs, policies[i].GroupIDs = []PolicyCondition{}, []int64{}, []int64{}
	}
	var conds []struct {
		PolicyID                 int64  `bun:"policy_id"`
		SequenceNumber           int    `bun:"sequence_number"`
		FactorType               string `bun:"factor_type"`
		Comparator               string `bun:"comparator"`
		IncludeAllTrustedSources bool   `bun:"include_all_trusted_sources"`
	}
	if err := db.NewSelect().Table("ca_policy_conditions").Column("policy_id", "sequence_number", "factor_type", "comparator", "include_all_trusted_sources").
		Where("policy_id IN (?)", bun.List(ids)).OrderExpr("policy_id, sequence_number").Scan(ctx, &conds); err != nil {
		return fmt.Errorf("select policy conditions: %w", err)
	}
	var cfgs []struct {
		PolicyID       int64 `bun:"policy_id"`
		SequenceNumber int   `bun:"sequence_number"`
		ConfigID       int64 `bun:"config_id"`
	}
	if err := db.NewSelect().Table("ca_policy_condition_configs").Column("policy_id", "sequence_number", "config_id").
		Where("policy_id IN (?)", bun.List(ids)).OrderExpr("policy_id, sequence_number, position").Scan(ctx, &cfgs); err != nil {
		return fmt.Errorf("select policy condition configs: %w", err)
	}
	type key struct {
		policy int64
		seq    int
	}
	configs := map[key][]RefID{}
	for _, c := range cfgs {
		k := key{c.PolicyID, c.SequenceNumber}
		configs[k] = append(configs[k], RefID(c.ConfigID))
	}
	for _, c := range conds {
		p := &policies[at[c.PolicyID]]
		fc := configs[key{c.PolicyID, c.SequenceNumber}]
		if fc == nil {
			fc = []RefID{}
		}
		p.Conditions = append(p.Conditions, PolicyCondition{SequenceNumber: c.SequenceNumber, FactorType: c.FactorType,
			Comparator: c.Comparator, FactorConfigs: fc, IncludeAllTrustedSources: c.IncludeAllTrustedSources})
	}
	var assigned []struct {
		PolicyID int64  `bun:"policy_id"`
		Kind     string `bun:"kind"`
		TargetID int64  `bun:"target_id"`
	}
	err := db.NewSelect().TableExpr("ca_policy_assignments AS a").Column("a.policy_id", "a.kind", "a.target_id").
		Where("a.policy_id IN (?) AND a.kind IN (?)", bun.List(ids), bun.List([]string{assignUser, assignGroup})).
		Where("(a.kind = ? AND EXISTS (SELECT 1 FROM users AS u WHERE u.id = a.target_id AND u.org_id = ?)) OR "+
			"(a.kind = ? AND EXISTS (SELECT 1 FROM groups AS g WHERE g.id = a.target_id AND g.org_id = ?))", assignUser, orgID, assignGroup, orgID).
		OrderExpr("a.policy_id, a.kind, a.target_id").Scan(ctx, &assigned)
	if err != nil {
		return fmt.Errorf("select policy assignments: %w", err)
	}
	for _, a := range assigned {
		p := &policies[at[a.PolicyID]]
		if a.Kind == assignUser {
			p.UserIDs = append(p.UserIDs, a.TargetID)
		} else {
			p.GroupIDs = append(p.GroupIDs, a.TargetID)
		}
	}
	var templateIDs []int64
	for i := range policies {
		for _, st := range policies[i].EndpointsSettings {
			if id := st.AdvancedSettings.NotificationTemplateID; id != nil {
				templateIDs = append(templateIDs, int64(*id))
			}
		}
	}
	if len(templateIDs) == 0 {
		return nil
	}
	var names []struct {
		ID   int64  `bun:"id"`
		Name string `bun:"name"`
	}
	if err := db.NewSelect().Table("notification_templates").Column("id", "name").
		Where("org_id = ? AND id IN (?)", orgID, bun.List(templateIDs)).Scan(ctx, &names); err != nil {
		return fmt.Errorf("select notification templates: %w", err)
	}
	byID := map[int64]string{}
	for _, n := range names {
		byID[n.ID] = n.Name
	}
	for i := range policies {
		for j := range policies[i].EndpointsSettings {
			a := &policies[i].EndpointsSettings[j].AdvancedSettings //nolint:gosec // i and j range over the slices they index
			if id := a.NotificationTemplateID; id != nil {
				if name, ok := byID[int64(*id)]; ok {
					a.NotificationTemplate = &TemplateRef{ID: *id, Name: name}
				}
			}
		}
	}
	return nil
}

// validate checks p whole (shape, then the ids it names) in tx.
func validatePolicy(ctx context.Context, tx bun.IDB, p *Policy) error {
	var pr models.Problems
	refs := checkPolicy(p, &pr)
	if err := checkPolicyRefs(ctx, tx, p.OrgID, refs, &pr); err != nil {
		return err
	}
	return pr.Result()
}

// Create checks p and inserts it with the next priority, just before the
// default policy, filling its id, priority and times. EINVALID when a field
// breaks a rule (one cause per field); ECONFLICT when the name is taken or
// the organization has PolicyLimits.MaxPolicies policies.
func (s *PolicyStore) Create(ctx context.Context, p *Policy, by PolicyActor) error {
	p.IsDefault = false
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		def, err := s.ensureDefault(ctx, tx, p.OrgID)
		if err != nil {
			return err
		}
		if err := validatePolicy(ctx, tx, p); err != nil {
			return err
		}
		if def.Priority-1 >= int64(PolicyLimits.MaxPolicies) {
			return &models.Error{Code: models.ECONFLICT, Detail: fmt.Sprintf("the organization has %d policies besides the default, the most it may have", def.Priority-1)}
		}
		p.ID = sqldb.NewID()
		p.Priority = def.Priority
		now := time.Now().UTC()
		p.CreatedAt, p.UpdatedAt = now, now
		if err := stampActor(ctx, tx, p, by); err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model((*Policy)(nil)).Set("priority = ?", def.Priority+1).Where("id = ?", def.ID).Exec(ctx); err != nil {
			return fmt.Errorf("move default policy: %w", err)
		}
		if _, err := tx.NewInsert().Model(p).Exec(ctx); err != nil {
			return policyWriteError(err)
		}
		if err := writePolicyRows(ctx, tx, p, false); err != nil {
			return err
		}
		if err := record(ctx, p.OrgID, audit.PolicyCreated, policyTarget(p)); err != nil {
			return err
		}
		return BumpProtectionVersion(ctx, tx, p.OrgID)
	})
}

func stampActor(ctx context.Context, tx bun.IDB, p *Policy, by PolicyActor) error {
	p.UpdatedBy, p.UpdatedByName = by.UserID, by.ClientID
	if by.UserID == 0 {
		return nil
	}
	var email string
	err := tx.NewSelect().Table("users").Column("email").Where("id = ? AND org_id = ?", by.UserID, p.OrgID).Scan(ctx, &email)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("select user: %w", err)
	}
	if email != "" {
		p.UpdatedByName = email
	}
	return nil
}

// writePolicyRows writes p's condition, config and assignment rows,
// replacing those it had when replace is set.
func writePolicyRows(ctx context.Context, tx bun.Tx, p *Policy, replace bool) error {
	if replace {
		for _, table := range []string{"ca_policy_condition_configs", "ca_policy_conditions", "ca_policy_assignments"} {
			if _, err := tx.NewDelete().TableExpr(table).Where("policy_id = ?", p.ID).Exec(ctx); err != nil {
				return fmt.Errorf("delete %s: %w", table, err)
			}
		}
	}
	type condRow struct {
		bun.BaseModel            `bun:"table:ca_policy_conditions"`
		PolicyID                 int64  `bun:"policy_id"`
		SequenceNumber           int    `bun:"sequence_number"`
		FactorType               string `bun:"factor_type"`
		Comparator               string `bun:"comparator"`
		IncludeAllTrustedSources bool   `bun:"include_all_trusted_sources"`
	}
	type cfgRow struct {
		bun.BaseModel  `bun:"table:ca_policy_condition_configs"`
		PolicyID       int64 `bun:"policy_id"`
		SequenceNumber int   `bun:"sequence_number"`
		Position       int   `bun:"position"`
		ConfigID       int64 `bun:"config_id"`
		OrgID          int64 `bun:"org_id"`
	}
	type assignRow struct {
		bun.BaseModel `bun:"table:ca_policy_assignments"`
		PolicyID      int64  `bun:"policy_id"`
		OrgID         int64  `bun:"org_id"`
		Kind          string `bun:"kind"`
		TargetID      int64  `bun:"target_id"`
	}
	var conds []condRow
	var cfgs []cfgRow
	for _, c := range p.Conditions {
		conds = append(conds, condRow{PolicyID: p.ID, SequenceNumber: c.SequenceNumber, FactorType: c.FactorType, Comparator: c.Comparator, IncludeAllTrustedSources: c.IncludeAllTrustedSources})
		for i, id := range c.FactorConfigs {
			cfgs = append(cfgs, cfgRow{PolicyID: p.ID, SequenceNumber: c.SequenceNumber, Position: i, ConfigID: int64(id), OrgID: p.OrgID})
		}
	}
	var assigns []assignRow
	add := func(kind string, ids []int64) {
		for _, id := range ids {
			assigns = append(assigns, assignRow{PolicyID: p.ID, OrgID: p.OrgID, Kind: kind, TargetID: id})
		}
	}
	add(assignUser, p.UserIDs)
	add(assignGroup, p.GroupIDs)
	if st := p.Setting(EndpointComputerDevices); st != nil && st.DeviceAssignment != nil {
		add(assignDevice, refIDs(st.DeviceAssignment.DeviceIDs))
		add(assignDeviceGroup, refIDs(st.DeviceAssignment.GroupIDs))
	}
	for _, rows := range []struct {
		n     int
		model any
	}{{len(conds), &conds}, {len(cfgs), &cfgs}, {len(assigns), &assigns}} {
		if rows.n == 0 {
			continue
		}
		if _, err := tx.NewInsert().Model(rows.model).Exec(ctx); err != nil {
			return fmt.Errorf("insert policy rows: %w", err)
		}
	}
	return nil
}

// Update changes a policy: change receives the current policy (as Get
// reads it) and returns the new one, checked whole and written in the same
// transaction. The default policy keeps its name, stays enabled and takes
// no conditions or assignments. ErrPolicyNotFound, EINVALID, ECONFLICT as
// Create.
func (s *PolicyStore) Update(ctx context.Context, orgID, id int64, by PolicyActor, change func(cur *Policy) (*Policy, error)) (*Policy, error) {
	var out *Policy
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if _, err := s.ensureDefault(ctx, tx, orgID); err != nil {
			return err
		}
		cur, err := s.get(ctx, tx, orgID, id)
		if err != nil {
			return err
		}
		before, was := *cur, policySnapshot(cur)
		next, err := change(cur)
		if err != nil {
			return err
		}
		next.ID, next.OrgID, next.IsDefault, next.Priority, next.CreatedAt = before.ID, before.OrgID, before.IsDefault, before.Priority, before.CreatedAt
		if next.IsDefault && next.Name != before.Name {
			return models.Invalid("name", "the default policy's name cannot change")
		}
		if err = validatePolicy(ctx, tx, next); err != nil {
			return err
		}
		next.UpdatedAt = time.Now().UTC()
		if err = stampActor(ctx, tx, next, by); err != nil {
			return err
		}
		if _, err = tx.NewUpdate().Model(next).WherePK().Exec(ctx); err != nil {
			return policyWriteError(err)
		}
		if err = writePolicyRows(ctx, tx, next, true); err != nil {
			return err
		}
		if err = BumpProtectionVersion(ctx, tx, orgID); err != nil {
			return err
		}
		if out, err = s.get(ctx, tx, orgID, id); err != nil {
			return err
		}
		return record(ctx, orgID, audit.PolicyUpdated, withChanges(policyTarget(out), was, policySnapshot(out)))
	})
	return out, err
}

// Delete removes a policy; those after it move up one. ErrPolicyNotFound
// when missing; ECONFLICT for the default policy.
func (s *PolicyStore) Delete(ctx context.Context, orgID, id int64) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		def, err := s.ensureDefault(ctx, tx, orgID)
		if err != nil {
			return err
		}
		if id == def.ID {
			return &models.Error{Code: models.ECONFLICT, Title: "Default Policy", Detail: "the default policy cannot be deleted"}
		}
		var prio int64
		var name string
		err = tx.NewSelect().Model((*Policy)(nil)).Column("priority", "name").Where("org_id = ? AND id = ?", orgID, id).Scan(ctx, &prio, &name)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrPolicyNotFound
		}
		if err != nil {
			return fmt.Errorf("select policy: %w", err)
		}
		if _, err := tx.NewDelete().Model((*Policy)(nil)).Where("id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("delete policy: %w", err)
		}
		if _, err := tx.NewUpdate().Model((*Policy)(nil)).Set("priority = priority - 1").Where("org_id = ? AND priority > ?", orgID, prio).Exec(ctx); err != nil {
			return fmt.Errorf("renumber policies: %w", err)
		}
		if err := record(ctx, orgID, audit.PolicyDeleted, audit.Target(PolicyTargetType, id, name)); err != nil {
			return err
		}
		return BumpProtectionVersion(ctx, tx, orgID)
	})
}

// Reorder sets the priorities of the organization's policies: ids lists
// every policy but the default, each once, in the new order (priority 1
// first); the default stays last. EINVALID otherwise.
func (s *PolicyStore) Reorder(ctx context.Context, orgID int64, ids []int64) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		def, err := s.ensureDefault(ctx, tx, orgID)
		if err != nil {
			return err
		}
		var cur []Policy
		if err := tx.NewSelect().Model(&cur).Column("id", "name", "priority").Where("org_id = ? AND NOT is_default", orgID).OrderExpr("priority, id").Scan(ctx); err != nil {
			return fmt.Errorf("select policies: %w", err)
		}
		have := make([]int64, len(cur))
		for i := range cur {
			have[i] = cur[i].ID
		}
		seen := map[int64]bool{}
		for _, id := range ids {
			switch {
			case id == def.ID:
				return models.Invalid("ids", "names the default policy, which is always last")
			case seen[id]:
				return models.Invalid("ids", "names policy %d more than once", id)
			case !slices.Contains(have, id):
				return models.Invalid("ids", "no policy with id %d", id)
			}
			seen[id] = true
		}
		if len(ids) != len(have) {
			var left []string
			for _, id := range have {
				if !seen[id] {
					left = append(left, models.FormatID(id))
				}
			}
			slices.Sort(left)
			return models.Invalid("ids", "must name every policy but the default, each once; missing %s", firstFew(left))
		}
		for i, id := range ids {
			if _, err := tx.NewUpdate().Model((*Policy)(nil)).Set("priority = ?", i+1).Where("id = ?", id).Exec(ctx); err != nil {
				return fmt.Errorf("set priority: %w", err)
			}
		}
		if _, err := tx.NewUpdate().Model((*Policy)(nil)).Set("priority = ?", len(ids)+1).Where("id = ?", def.ID).Exec(ctx); err != nil {
			return fmt.Errorf("set default priority: %w", err)
		}
		if err := recordPriorities(ctx, orgID, append(cur, *def), slices.Concat(ids, []int64{def.ID})); err != nil {
			return err
		}
		return BumpProtectionVersion(ctx, tx, orgID)
	})
}

// recordPriorities records policy.priority_changed for the policies of
// before (with their priorities before) whose priority moved now that order
// lists them from priority 1 on; none when none moved.
func recordPriorities(ctx context.Context, orgID int64, before []Policy, order []int64) error {
	at := make(map[int64]int64, len(order))
	for i, id := range order {
		at[id] = int64(i + 1)
	}
	var targets []models.EventTarget
	for _, p := range before {
		if now, ok := at[p.ID]; ok && now != p.Priority {
			t := policyTarget(&p)
			t.Changes = []models.FieldChange{{Field: "priority", Old: p.Priority, New: now}}
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	return recordBulk(ctx, orgID, audit.PolicyPriorityChanged, nil, targets)
}

// PolicySet is what deciding needs of one organization: its enabled
// policies in priority order, each with conditions and assignments, and
// every condition config they name.
type PolicySet struct {
	// Policies are the enabled policies, priority 1 first, the default
	// policy last.
	Policies []Policy
	// Configs holds every config a condition names, by id, and every
	// trusted IP source config (for include_all_trusted_sources).
	Configs map[int64]*ConditionConfig
	// TrustedSources are the ids of the IP source configs marked trusted,
	// ascending.
	TrustedSources []int64
	// DeviceIDs and DeviceGroupIDs are the devices and device groups each
	// policy's ComputerDevices setting names (existing or not), by policy
	// id.
	DeviceIDs      map[int64][]int64
	DeviceGroupIDs map[int64][]int64
}

// LoadEnabledPolicies reads, for one organization, every enabled policy in
// priority order with its conditions, its user and group assignments (those
// that still exist), its device assignments and every condition config
// referenced, in six queries whatever the number of policies. The default
// policy is created first when missing, so the set always ends with it.
// This is the decision engine's one read per decision (or per cache fill).
func (s *PolicyStore) LoadEnabledPolicies(ctx context.Context, orgID int64) (*PolicySet, error) {
	if err := s.ensure(ctx, orgID); err != nil {
		return nil, err
	}
	set := &PolicySet{Configs: map[int64]*ConditionConfig{}, DeviceIDs: map[int64][]int64{}, DeviceGroupIDs: map[int64][]int64{}}
	if err := s.db.NewSelect().Model(&set.Policies).Where("p.org_id = ? AND p.is_enabled", orgID).OrderExpr("p.priority, p.id").Scan(ctx); err != nil {
		return nil, fmt.Errorf("select policies: %w", err)
	}
	if err := loadPolicyDetails(ctx, s.db, orgID, set.Policies); err != nil {
		return nil, err
	}
	var configs []ConditionConfig
	err := s.db.NewSelect().Model(&configs).ColumnExpr("cc.*").
		Where("cc.org_id = ?", orgID).
		Where("(cc.family = ? AND cc.is_trusted_source) OR cc.id IN (SELECT pcc.config_id FROM ca_policy_condition_configs AS pcc JOIN ca_policies AS p ON p.id = pcc.policy_id WHERE p.org_id = ? AND p.is_enabled)", FamilyIPSources, orgID).
		OrderExpr("cc.id").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select condition configs: %w", err)
	}
	for i := range configs {
		c := &configs[i]
		set.Configs[c.ID] = c
		if c.Family == FamilyIPSources && c.IsTrustedSource {
			set.TrustedSources = append(set.TrustedSources, c.ID)
		}
	}
	for _, p := range set.Policies {
		if st := p.Setting(EndpointComputerDevices); st != nil && st.DeviceAssignment != nil {
			set.DeviceIDs[p.ID] = refIDs(st.DeviceAssignment.DeviceIDs)
			set.DeviceGroupIDs[p.ID] = refIDs(st.DeviceAssignment.GroupIDs)
		}
	}
	return set, nil
}

func policyWriteError(err error) error {
	if sqldb.IsUniqueViolation(err) {
		return &models.Error{Code: models.ECONFLICT, Field: "name", Detail: "a policy with this name exists"}
	}
	return fmt.Errorf("write policy: %w", err)
}
