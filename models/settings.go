package models

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// AdminSettings are an organization's administrator settings (spec 2.12).
// An organization that never stored any has DefaultAdminSettings.
type AdminSettings struct {
	PasswordlessEnabledForNPSVPN bool                    `json:"passwordless_enabled_for_nps_vpn"`
	CaptchaType                  string                  `json:"captcha_type"`
	AccountBlocking              AccountBlockingSettings `json:"account_blocking_settings"`
	OfflineMFA                   OfflineMFASettings      `json:"offline_mfa_settings"`
}

// AccountBlockingSettings decide what failed sign-ins do. Both durations are
// in minutes (the interface leaves the unit open).
//
// Failures are counted in a window that opens at the first failure and lasts
// FailedAttemptsResetInterval minutes; a failure after the window opens a new
// one. The FailedAttemptsThreshold-th failure within a window blocks the
// account for BlockingDuration minutes, or until an administrator lifts the
// block when IsBlockForever is set, and clears the count. A successful
// sign-in clears the count when ResetFailureAttemptsOnSuccess is set.
type AccountBlockingSettings struct {
	FailedAttemptsThreshold       int  `json:"failed_attempts_threshold"`
	FailedAttemptsResetInterval   int  `json:"failed_attempts_reset_interval"`
	IsBlockForever                bool `json:"is_block_forever"`
	BlockingDuration              int  `json:"blocking_duration"`
	ResetFailureAttemptsOnSuccess bool `json:"reset_failure_attempts_on_success"`
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

// DevicesAssignment names devices and device groups.
type DevicesAssignment struct {
	DeviceIDs []string `json:"device_ids"`
	GroupIDs  []string `json:"group_ids"`
}

// OfflineMFASecondary is the second factor part of the offline MFA settings.
type OfflineMFASecondary struct {
	NoOfRequiredFactors int                   `json:"no_of_required_factors"`
	FactorConfigs       []FactorConfigSetting `json:"factor_configs"`
}

// FactorConfigSetting is one authentication factor in an ordered list.
type FactorConfigSetting struct {
	AuthnFactorConfigID int  `json:"authn_factor_config_id"`
	VerificationOrder   int  `json:"verification_order"`
	IsMandatory         bool `json:"is_mandatory"`
}

// DurationSetting is an amount of a unit (hours, days).
type DurationSetting struct {
	Value int    `json:"value"`
	Unit  string `json:"unit"`
}

// Limits of the account blocking settings, in minutes: a year at most.
const maxBlockingMinutes = 365 * 24 * 60

// DefaultAdminSettings are the settings of an organization that stored none.
// Account blocking: 5 failures within 30 minutes block the account for 30
// minutes; a success clears the count.
func DefaultAdminSettings() AdminSettings {
	return AdminSettings{
		CaptchaType: "recaptcha",
		AccountBlocking: AccountBlockingSettings{
			FailedAttemptsThreshold:       5,
			FailedAttemptsResetInterval:   30,
			IsBlockForever:                false,
			BlockingDuration:              30,
			ResetFailureAttemptsOnSuccess: true,
		},
		OfflineMFA: OfflineMFASettings{
			DevicesAssignment:           DevicesAssignment{DeviceIDs: []string{}, GroupIDs: []string{}},
			Actions:                     []string{},
			SecondaryAuthentication:     OfflineMFASecondary{NoOfRequiredFactors: 1, FactorConfigs: []FactorConfigSetting{}},
			OfflineVerificationDuration: DurationSetting{Value: 7, Unit: "days"},
		},
	}
}

// Validate reports the first field of the account blocking settings that
// breaks its rule (EINVALID).
func (a AccountBlockingSettings) Validate() error {
	const prefix = "account_blocking_settings."
	switch {
	case a.FailedAttemptsThreshold < 1 || a.FailedAttemptsThreshold > 1000:
		return Invalid(prefix+"failed_attempts_threshold", "must be between 1 and 1000")
	case a.FailedAttemptsResetInterval < 1 || a.FailedAttemptsResetInterval > maxBlockingMinutes:
		return Invalid(prefix+"failed_attempts_reset_interval", "must be between 1 and %d minutes", maxBlockingMinutes)
	case !a.IsBlockForever && (a.BlockingDuration < 1 || a.BlockingDuration > maxBlockingMinutes):
		return Invalid(prefix+"blocking_duration", "must be between 1 and %d minutes", maxBlockingMinutes)
	}
	return nil
}

// Validate checks the settings (EINVALID naming the first broken field).
func (s AdminSettings) Validate() error {
	switch s.CaptchaType {
	case "recaptcha", "text_captcha":
	default:
		return Invalid("captcha_type", "must be recaptcha or text_captcha")
	}
	return s.AccountBlocking.Validate()
}

type adminSettingsRow struct {
	bun.BaseModel `bun:"table:admin_settings"`

	OrgID     int64           `bun:"org_id,pk"`
	Settings  json.RawMessage `bun:"settings,type:json"`
	UpdatedAt time.Time       `bun:"updated_at"`
}

// SettingsStore reads and writes administrator settings.
type SettingsStore struct{ db bun.IDB }

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

// Put stores the organization's settings whole. EINVALID when a field breaks
// its rule.
func (s *SettingsStore) Put(ctx context.Context, orgID int64, settings *AdminSettings) error {
	if err := settings.Validate(); err != nil {
		return err
	}
	doc, err := json.Marshal(settings)
	if err != nil {
		return fmt.Errorf("encode admin settings: %w", err)
	}
	row := &adminSettingsRow{OrgID: orgID, Settings: doc, UpdatedAt: time.Now().UTC()}
	_, err = s.db.NewInsert().Model(row).
		On("CONFLICT (org_id) DO UPDATE").
		Set("settings = EXCLUDED.settings").
		Set("updated_at = EXCLUDED.updated_at").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("store admin settings: %w", err)
	}
	return nil
}
