package protection

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/enrollment"
	"iam/models/identity"
	"iam/models/sqldb"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// AdminSettings are an organization's administrator settings (spec 2.12).
// An organization that never stored any has DefaultAdminSettings.
type AdminSettings struct {
	PasswordlessEnabledForNPSVPN bool                             `json:"passwordless_enabled_for_nps_vpn"`
	CaptchaType                  string                           `json:"captcha_type"`
	AccountBlocking              identity.AccountBlockingSettings `json:"account_blocking_settings"`
	OfflineMFA                   OfflineMFASettings               `json:"offline_mfa_settings"`
}

// OfflineMFASettings are the offline multi-factor settings of spec 2.12.
type OfflineMFASettings struct {
	IsEnabled                   bool                `json:"is_enabled"`
	DevicesAssignment           DevicesAssignment   `json:"devices_assignment"`
	Actions                     []string            `json:"actions"`
	SecondaryAuthentication     OfflineMFASecondary `json:"secondary_authentication"`
	OfflineVerificationDuration DurationSetting     `json:"offline_verification_duration"`
	BypassMFAConnectionError    bool                `json:"bypass_mfa_connection_error"`
}

// DevicesAssignment names devices and device groups. The ids are RefIDs,
// as in policies: "0<id>" or "+<id>" read as <id>, and are stored and shown
// as the digits alone, so that they match the device or group they name.
type DevicesAssignment struct {
	DeviceIDs []RefID `json:"device_ids"`
	GroupIDs  []RefID `json:"group_ids"`
}

// OfflineMFASecondary is the second factor part of the offline MFA settings.
type OfflineMFASecondary struct {
	NoOfRequiredFactors int                   `json:"no_of_required_factors"`
	FactorConfigs       []FactorConfigSetting `json:"factor_configs"`
}

// FactorConfigSetting is one authentication factor in an ordered list.
type FactorConfigSetting struct {
	AuthnFactorConfigID int64 `json:"authn_factor_config_id"`
	VerificationOrder   int   `json:"verification_order"`
	IsMandatory         bool  `json:"is_mandatory"`
}

// DurationSetting is an amount of a unit: hours or days for the offline
// verification duration.
type DurationSetting struct {
	Value int    `json:"value"`
	Unit  string `json:"unit"`
}

// DefaultAdminSettings are the settings of an organization that stored none.
// Account blocking: 5 failures within 30 minutes block the account for 30
// minutes; a success clears the count.
func DefaultAdminSettings() AdminSettings {
	return AdminSettings{
		CaptchaType: "recaptcha",
		AccountBlocking: identity.AccountBlockingSettings{
			FailedAttemptsThreshold:       5,
			FailedAttemptsResetInterval:   30,
			IsBlockForever:                false,
			BlockingDuration:              30,
			ResetFailureAttemptsOnSuccess: true,
		},
		OfflineMFA: OfflineMFASettings{
			DevicesAssignment:           DevicesAssignment{DeviceIDs: []RefID{}, GroupIDs: []RefID{}},
			Actions:                     []string{},
			SecondaryAuthentication:     OfflineMFASecondary{NoOfRequiredFactors: 1, FactorConfigs: []FactorConfigSetting{}},
			OfflineVerificationDuration: DurationSetting{Value: 7, Unit: "days"},
		},
	}
}

// OfflineMFAActions are the offline MFA actions (spec 2.12).
var OfflineMFAActions = []string{"InteractiveLogon", "MachineUnlock", "RDP", "SSH", "UAC", "Sudo"}

// Limits of the settings' lists.
const (
	// MaxAssignedIDs caps devices_assignment.device_ids and group_ids each.
	MaxAssignedIDs = 1000
	// maxOfflineFactors caps secondary_authentication.factor_configs.
	maxOfflineFactors = 16
	maxOfflineHours   = 365 * 24
	maxOfflineDays    = 365
)

// Validate checks the settings alone, without the database (EINVALID naming
// the first broken field). The store also checks that the devices, device
// groups and factor configs named exist (SettingsStore.Update).
func (s AdminSettings) Validate() error {
	switch s.CaptchaType {
	case "recaptcha", "text_captcha":
	default:
		return models.Invalid("captcha_type", "must be recaptcha or text_captcha")
	}
	if err := s.AccountBlocking.Validate(); err != nil {
		return err
	}
	return s.OfflineMFA.Validate()
}

// Validate checks the offline MFA settings' shape: known actions without
// repeats, ids that are ids, factor configs without repeats whose
// verification orders are 1..n, a required count between the mandatory
// factors and all of them, and a duration of 1 to 8760 hours or 1 to 365 days.
func (o OfflineMFASettings) Validate() error {
	const prefix = "offline_mfa_settings."
	seen := map[string]bool{}
	for _, a := range o.Actions {
		if !models.OneOf(a, OfflineMFAActions) {
			return models.Invalid(prefix+"actions", "%q is not one of %s", a, strings.Join(OfflineMFAActions, ", "))
		}
		if seen[a] {
			return models.Invalid(prefix+"actions", "%q is listed twice", a)
		}
		seen[a] = true
	}
	for _, l := range []struct {
		field string
		ids   []RefID
	}{{"devices_assignment.device_ids", o.DevicesAssignment.DeviceIDs}, {"devices_assignment.group_ids", o.DevicesAssignment.GroupIDs}} {
		if len(l.ids) > MaxAssignedIDs {
			return models.Invalid(prefix+l.field, "at most %d ids", MaxAssignedIDs)
		}
		for _, id := range l.ids {
			if id <= 0 {
				return models.Invalid(prefix+l.field, "%d is not an id", id)
			}
		}
	}
	sec := o.SecondaryAuthentication
	fc := sec.FactorConfigs
	if len(fc) > maxOfflineFactors {
		return models.Invalid(prefix+"secondary_authentication.factor_configs", "at most %d factor configs", maxOfflineFactors)
	}
	ids, orders, mandatory := map[int64]bool{}, map[int]bool{}, 0
	for _, f := range fc {
		if ids[f.AuthnFactorConfigID] {
			return models.Invalid(prefix+"secondary_authentication.factor_configs", "factor config %d is listed twice", f.AuthnFactorConfigID)
		}
		ids[f.AuthnFactorConfigID] = true
		if f.VerificationOrder < 1 || f.VerificationOrder > len(fc) || orders[f.VerificationOrder] {
			return models.Invalid(prefix+"secondary_authentication.factor_configs",
				"verification_order must number the %d factor configs 1 to %d, each once", len(fc), len(fc))
		}
		orders[f.VerificationOrder] = true
		if f.IsMandatory {
			mandatory++
		}
	}
	switch {
	case sec.NoOfRequiredFactors < 1:
		return models.Invalid(prefix+"secondary_authentication.no_of_required_factors", "must be at least 1")
	case len(fc) > 0 && sec.NoOfRequiredFactors > len(fc):
		return models.Invalid(prefix+"secondary_authentication.no_of_required_factors", "must be at most the %d factor configs listed", len(fc))
	case sec.NoOfRequiredFactors < mandatory:
		return models.Invalid(prefix+"secondary_authentication.no_of_required_factors", "must be at least the %d mandatory factor configs", mandatory)
	case o.IsEnabled && len(fc) == 0:
		return models.Invalid(prefix+"secondary_authentication.factor_configs", "name at least one factor config when offline MFA is enabled")
	}
	d := o.OfflineVerificationDuration
	switch d.Unit {
	case "hours":
		if d.Value < 1 || d.Value > maxOfflineHours {
			return models.Invalid(prefix+"offline_verification_duration.value", "must be between 1 and %d hours", maxOfflineHours)
		}
	case "days":
		if d.Value < 1 || d.Value > maxOfflineDays {
			return models.Invalid(prefix+"offline_verification_duration.value", "must be between 1 and %d days", maxOfflineDays)
		}
	default:
		return models.Invalid(prefix+"offline_verification_duration.unit", "must be hours or days")
	}
	return nil
}

// checkRefs checks that the devices, device groups and factor configs the
// offline MFA settings name are the organization's (EINVALID naming those
// that are not).
func (o OfflineMFASettings) checkRefs(ctx context.Context, db bun.IDB, orgID int64) error {
	const prefix = "offline_mfa_settings."
	devs := refIDs(o.DevicesAssignment.DeviceIDs)
	found, err := existingDevices(ctx, db, orgID, devs)
	if err != nil {
		return err
	}
	if miss := missingIDs(devs, found); len(miss) > 0 {
		return models.Invalid(prefix+"devices_assignment.device_ids", "no such devices in the organization: %s", strings.Join(miss, ", "))
	}
	groups := refIDs(o.DevicesAssignment.GroupIDs)
	if miss, err := NewDeviceGroupStore(db).MissingGroups(ctx, orgID, groups); err != nil {
		return err
	} else if len(miss) > 0 {
		return models.Invalid(prefix+"devices_assignment.group_ids", "no such device groups in the organization: %s", joinIDs(miss))
	}
	if len(o.SecondaryAuthentication.FactorConfigs) > 0 {
		configs, err := enrollment.NewFactorStore(db).List(ctx, orgID)
		if err != nil {
			return err
		}
		known := map[int64]bool{}
		for _, c := range configs {
			known[c.ID] = true
		}
		var unknown []int64
		for _, f := range o.SecondaryAuthentication.FactorConfigs {
			if !known[f.AuthnFactorConfigID] {
				unknown = append(unknown, f.AuthnFactorConfigID)
			}
		}
		if len(unknown) > 0 {
			return models.Invalid(prefix+"secondary_authentication.factor_configs", "no such factor configs in the organization: %s", joinIDs(unknown))
		}
	}
	return nil
}

func joinIDs(ids []int64) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = models.FormatID(id)
	}
	return strings.Join(out, ", ")
}

// normalize makes lists a patch set to null empty and keeps the first of
// ids listed twice (as "7" and "07", say).
func (s *AdminSettings) normalize() {
	o := &s.OfflineMFA
	o.DevicesAssignment.DeviceIDs = uniqueRefIDs(o.DevicesAssignment.DeviceIDs)
	o.DevicesAssignment.GroupIDs = uniqueRefIDs(o.DevicesAssignment.GroupIDs)
	if o.Actions == nil {
		o.Actions = []string{}
	}
	if o.SecondaryAuthentication.FactorConfigs == nil {
		o.SecondaryAuthentication.FactorConfigs = []FactorConfigSetting{}
	}
}

// ForDevice is what the agent of a device that belongs to the device groups
// groupIDs receives: the settings without the assignment lists when they
// assign the device and are enabled, else disabled settings with no actions
// and no factors.
func (o OfflineMFASettings) ForDevice(deviceID int64, groupIDs []int64) OfflineMFASettings {
	out := o
	out.DevicesAssignment = DevicesAssignment{DeviceIDs: []RefID{}, GroupIDs: []RefID{}}
	if o.IsEnabled && o.AssignsDevice(deviceID, groupIDs) {
		return out
	}
	out.IsEnabled = false
	out.Actions = []string{}
	out.SecondaryAuthentication = OfflineMFASecondary{NoOfRequiredFactors: o.SecondaryAuthentication.NoOfRequiredFactors, FactorConfigs: []FactorConfigSetting{}}
	out.BypassMFAConnectionError = false
	return out
}

// AssignsDevice reports whether the offline MFA settings apply to a device
// that belongs to the device groups groupIDs: it is named in device_ids, or
// one of its groups in group_ids.
func (o OfflineMFASettings) AssignsDevice(deviceID int64, groupIDs []int64) bool {
	for _, d := range o.DevicesAssignment.DeviceIDs {
		if int64(d) == deviceID {
			return true
		}
	}
	for _, g := range o.DevicesAssignment.GroupIDs {
		if slices.Contains(groupIDs, int64(g)) {
			return true
		}
	}
	return false
}

type adminSettingsRow struct {
	bun.BaseModel `bun:"table:admin_settings"`

	OrgID     int64           `bun:"org_id,pk"`
	Settings  json.RawMessage `bun:"settings,type:json"`
	UpdatedAt time.Time       `bun:"updated_at"`
}

// SettingsStore reads and writes administrator settings.
type SettingsStore struct{ db bun.IDB }

// NewSettingsStore returns the SettingsStore over db (the database or a transaction).
func NewSettingsStore(db bun.IDB) *SettingsStore { return &SettingsStore{db: db} }

// Get returns the organization's settings: the stored ones over the
// defaults, so that a field never stored has its default.
func (s *SettingsStore) Get(ctx context.Context, orgID int64) (*AdminSettings, error) {
	settings := DefaultAdminSettings()
	row := new(adminSettingsRow)
	err := s.db.NewSelect().Model(row).Where("org_id = ?", orgID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return &settings, nil
	}
	if err != nil {
		return nil, fmt.Errorf("select admin settings: %w", err)
	}
	if err := json.Unmarshal(row.Settings, &settings); err != nil {
		return nil, fmt.Errorf("decode admin settings of organization %d: %w", orgID, err)
	}
	return &settings, nil
}

// Update reads the organization's settings, hands them to change and
// stores what it returns, validated (EINVALID naming the first broken field,
// including devices, device groups and factor configs that are not the
// organization's), in one transaction. It returns the stored settings.
func (s *SettingsStore) Update(ctx context.Context, orgID int64, change func(cur *AdminSettings) (*AdminSettings, error)) (*AdminSettings, error) {
	var out *AdminSettings
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		cur, err := NewSettingsStore(tx).Get(ctx, orgID)
		if err != nil {
			return err
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		if err := NewSettingsStore(tx).Put(ctx, orgID, next); err != nil {
			return err
		}
		out = next
		return nil
	})
	return out, err
}

// Put stores the organization's settings whole, in a transaction that
// records admin_settings.updated with the fields that changed. EINVALID
// when a field breaks its rule or names a device, device group or factor
// config the organization does not have.
func (s *SettingsStore) Put(ctx context.Context, orgID int64, settings *AdminSettings) error {
	settings.normalize()
	if err := settings.Validate(); err != nil {
		return err
	}
	doc, err := json.Marshal(settings)
	if err != nil {
		return fmt.Errorf("encode admin settings: %w", err)
	}
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := settings.OfflineMFA.checkRefs(ctx, tx, orgID); err != nil {
			return err
		}
		cur, err := NewSettingsStore(tx).Get(ctx, orgID)
		if err != nil {
			return err
		}
		row := &adminSettingsRow{OrgID: orgID, Settings: doc, UpdatedAt: time.Now().UTC()}
		_, err = tx.NewInsert().Model(row).
			On("CONFLICT (org_id) DO UPDATE").
			Set("settings = EXCLUDED.settings").
			Set("updated_at = EXCLUDED.updated_at").
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("store admin settings: %w", err)
		}
		t := adminSettingsTarget(orgID)
		t.Changes = audit.Changes(settingsSnapshot(cur), settingsSnapshot(settings))
		return record(ctx, orgID, audit.AdminSettingsUpdated, t)
	})
}
