package devices

import (
	"context"
	"encoding/json"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/sqldb"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
)

// AccountLinkingSettings decide how local accounts are linked automatically
// (spec 2.5); agents receive them in every check-in answer.
type AccountLinkingSettings struct {
	IsEnabled bool `json:"is_enabled"`
	// AttributeType "attribute": the local account name must equal the
	// user attribute AttributeValue names (LinkAttributes); "naming_format":
	// AttributeValue is a pattern of user macros (LinkMacros) and text, such
	// as "%first_name%.%last_name%", matched without regard to case.
	AttributeType               string               `json:"attribute_type"`
	AttributeValue              string               `json:"attribute_value"`
	LinkRestrictedLocalAccounts []string             `json:"link_restricted_local_accounts"`
	OnDemandProvisioning        OnDemandProvisioning `json:"ondemand_provisioning_settings"`
}

// OnDemandProvisioning lets the agent create a local account for a user
// who signs in without one.
type OnDemandProvisioning struct {
	IsEnabled              bool   `json:"is_enabled"`
	DefaultPermissionLevel string `json:"default_permission_level"`
}

// LinkAttributes are the user attributes an "attribute" setting may name.
var LinkAttributes = []string{"email_local_part", "email", "employeeID", "displayName", "firstName", "lastName", "mobileNumber"}

// LinkMacros are the user macros a naming format may use: those the
// notification templates fill.
var LinkMacros = []string{"%first_name%", "%last_name%", "%display_name%", "%email%", "%email_local_part%", "%employee_id%"}

// Limits of the settings.
const (
	MaxRestrictedAccounts = 100
	maxNamingFormatLen    = 256
)

var macroRe = regexp.MustCompile(`%[a-z_]+%`)

// DefaultAccountLinkingSettings are the settings of an organization that
// stored none: off, by email local part, built-in accounts restricted.
func DefaultAccountLinkingSettings() AccountLinkingSettings {
	return AccountLinkingSettings{
		AttributeType: "attribute", AttributeValue: "email_local_part",
		LinkRestrictedLocalAccounts: []string{"Administrator", "Guest", "DefaultAccount", "root"},
		OnDemandProvisioning:        OnDemandProvisioning{DefaultPermissionLevel: "standard"},
	}
}

// Validate checks the settings against their rules.
func (s *AccountLinkingSettings) Validate() error {
	switch s.AttributeType {
	case "attribute":
		if !models.OneOf(s.AttributeValue, LinkAttributes) {
			return models.Invalid("attribute_value", "must be one of %v for attribute_type attribute", LinkAttributes)
		}
	case "naming_format":
		if len(s.AttributeValue) > maxNamingFormatLen || !utf8.ValidString(s.AttributeValue) {
			return models.Invalid("attribute_value", "at most %d bytes of text", maxNamingFormatLen)
		}
		macros := macroRe.FindAllString(s.AttributeValue, -1)
		if len(macros) == 0 {
			return models.Invalid("attribute_value", "a naming format uses at least one of %v", LinkMacros)
		}
		for _, m := range macros {
			if !models.OneOf(m, LinkMacros) {
				return models.Invalid("attribute_value", "unknown macro %s; the macros are %v", m, LinkMacros)
			}
		}
	default:
		return models.Invalid("attribute_type", "must be attribute or naming_format")
	}
	if len(s.LinkRestrictedLocalAccounts) > MaxRestrictedAccounts {
		return models.Invalid("link_restricted_local_accounts", "at most %d names", MaxRestrictedAccounts)
	}
	for _, n := range s.LinkRestrictedLocalAccounts {
		if n == "" || len(n) > MaxAccountNameLen || !utf8.ValidString(n) || strings.TrimSpace(n) != n {
			return models.Invalid("link_restricted_local_accounts", "names are 1 to %d bytes of text without surrounding spaces", MaxAccountNameLen)
		}
	}
	if s.LinkRestrictedLocalAccounts == nil {
		s.LinkRestrictedLocalAccounts = []string{}
	}
	if !models.OneOf(s.OnDemandProvisioning.DefaultPermissionLevel, []string{"standard", "admin"}) {
		return models.Invalid("ondemand_provisioning_settings.default_permission_level", "must be standard or admin")
	}
	return nil
}

type linkingSettingsRow struct {
	bun.BaseModel `bun:"table:account_linking_settings"`

	OrgID     int64           `bun:"org_id,pk"`
	Settings  json.RawMessage `bun:"settings,type:json"`
	UpdatedAt time.Time       `bun:"updated_at"`
}

// LinkingSettings returns the organization's account-linking settings,
// the stored ones over the defaults.
func (s *DeviceStore) LinkingSettings(ctx context.Context, orgID int64) (*AccountLinkingSettings, error) {
	return linkingSettings(ctx, s.db, orgID)
}

func linkingSettings(ctx context.Context, db bun.IDB, orgID int64) (*AccountLinkingSettings, error) {
	out := DefaultAccountLinkingSettings()
	var row linkingSettingsRow
	err := db.NewSelect().Model(&row).Where("org_id = ?", orgID).Scan(ctx)
	if models.IsNoRows(err) {
		return &out, nil
	}
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("read account linking settings: %w", err))
	}
	if err := json.Unmarshal(row.Settings, &out); err != nil {
		return nil, fmt.Errorf("decode account linking settings: %w", err)
	}
	return &out, nil
}

// PutLinkingSettings stores the organization's account-linking settings
// whole, and records device.linking_settings.updated with the fields that
// changed. EINVALID when a field breaks its rule.
func (s *DeviceStore) PutLinkingSettings(ctx context.Context, orgID int64, set *AccountLinkingSettings) error {
	if err := set.Validate(); err != nil {
		return err
	}
	doc, err := json.Marshal(set)
	if err != nil {
		return err
	}
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		before, err := linkingSettings(ctx, tx, orgID)
		if err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(&linkingSettingsRow{OrgID: orgID, Settings: doc, UpdatedAt: time.Now().UTC()}).
			On("CONFLICT (org_id) DO UPDATE").Set("settings = EXCLUDED.settings").Set("updated_at = EXCLUDED.updated_at").
			Exec(ctx); err != nil {
			return fmt.Errorf("store account linking settings: %w", err)
		}
		target := models.EventTarget{Type: LinkingSettingsTargetType, ID: models.FormatID(orgID), DisplayName: "Account linking settings",
			Changes: audit.Changes(*before, *set)}
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.LinkingSettingsUpdated,
			Targets: []models.EventTarget{target}})
	})
}
