package protection

import (
	"context"
	"encoding/json"

	"iam/models"
	"iam/models/audit"
	"iam/models/identity"
)

// The audit events of protection: every change to condition configs,
// policies, device groups and the administrator settings records its
// event (models.Record) inside the transaction that makes it. An update's
// changes compare the entity as the API shows it (its JSON names), times
// of last modification left out.

// Target types of protection's events (a device group's members are
// devices.DeviceTargetType).
const (
	ConditionConfigTargetType = "condition_config"
	PolicyTargetType          = "policy"
	DeviceGroupTargetType     = "device_group"
	AdminSettingsTargetType   = "admin_settings"
)

// maxEventTargets is the most targets one event holds; a bulk change
// with more writes several events of its type.
const maxEventTargets = 1000

// recordBulk records events of type typ: main first, then targets, at
// most maxEventTargets targets an event (main first in each).
func recordBulk(ctx context.Context, orgID int64, typ string, main *models.EventTarget, targets []models.EventTarget) error {
	per := maxEventTargets
	if main != nil {
		per--
	}
	for start := 0; start == 0 || start < len(targets); start += per {
		part := targets[start:min(start+per, len(targets))]
		ev := models.AuditEvent{OrgID: orgID, Type: typ, Targets: make([]models.EventTarget, 0, len(part)+1)}
		if main != nil {
			ev.Targets = append(ev.Targets, *main)
		}
		ev.Targets = append(ev.Targets, part...)
		if err := models.Record(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// record records one event of type typ with one target.
func record(ctx context.Context, orgID int64, typ string, target models.EventTarget) error {
	return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: typ, Targets: []models.EventTarget{target}})
}

// snapshot is v as JSON, taken before a change that may alter what v
// points to, for audit.Changes.
func snapshot(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

// withChanges returns t with the changes between the snapshots before and
// after.
func withChanges(t models.EventTarget, before, after json.RawMessage) models.EventTarget {
	t.Changes = audit.Changes(before, after)
	return t
}

// configAudit is a condition config as its events compare it.
type configAudit struct {
	DisplayName                  string    `json:"display_name"`
	BusinessHoursBitmap          string    `json:"business_hours_bitmap,omitempty"`
	Timezone                     string    `json:"timezone,omitempty"`
	Countries                    []string  `json:"countries,omitempty"`
	IsUnknownIPLocationsIncluded bool      `json:"is_unknown_ip_locations_included"`
	IsTrustedSource              bool      `json:"is_trusted_source"`
	IPAddresses                  string    `json:"ip_addresses,omitempty"`
	IPAddressRanges              []IPRange `json:"ip_address_ranges,omitempty"`
}

func configSnapshot(c *ConditionConfig) json.RawMessage {
	return snapshot(configAudit{DisplayName: c.DisplayName, BusinessHoursBitmap: c.BusinessHoursBitmap, Timezone: c.Timezone,
		Countries: c.Countries, IsUnknownIPLocationsIncluded: c.IsUnknownIPLocationsIncluded, IsTrustedSource: c.IsTrustedSource,
		IPAddresses: c.IPAddresses, IPAddressRanges: c.IPAddressRanges})
}

func configTarget(c *ConditionConfig) models.EventTarget {
	return audit.Target(ConditionConfigTargetType, c.ID, c.DisplayName)
}

// policyAudit is a policy as its events compare it.
type policyAudit struct {
	Name              string                 `json:"name"`
	Description       string                 `json:"description"`
	IsEnabled         bool                   `json:"is_enabled"`
	UserAssignments   policyAssignments      `json:"user_assignments"`
	AccessConditions  AccessConditions       `json:"access_conditions"`
	AccessType        string                 `json:"access_type"`
	EndpointsSettings []EndpointSetting      `json:"endpoints_settings"`
	AdvancedSettings  PolicyAdvancedSettings `json:"advanced_settings"`
}

type policyAssignments struct {
	UserIDs  []RefID `json:"user_ids"`
	GroupIDs []RefID `json:"group_ids"`
}

func toRefIDs(ids []int64) []RefID {
	out := make([]RefID, len(ids))
	for i, id := range ids {
		out[i] = RefID(id)
	}
	return out
}

func policySnapshot(p *Policy) json.RawMessage {
	conds := p.Conditions
	if conds == nil {
		conds = []PolicyCondition{}
	}
	return snapshot(policyAudit{Name: p.Name, Description: p.Description, IsEnabled: p.IsEnabled,
		UserAssignments:  policyAssignments{UserIDs: toRefIDs(p.UserIDs), GroupIDs: toRefIDs(p.GroupIDs)},
		AccessConditions: AccessConditions{CriteriaExpression: p.CriteriaExpression, Conditions: conds},
		AccessType:       p.AccessType, EndpointsSettings: p.EndpointsSettings, AdvancedSettings: p.AdvancedSettings})
}

func policyTarget(p *Policy) models.EventTarget {
	return audit.Target(PolicyTargetType, p.ID, p.Name)
}

// deviceGroupAudit is a device group as its events compare it.
type deviceGroupAudit struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func deviceGroupTarget(g *DeviceGroup) models.EventTarget {
	return audit.Target(DeviceGroupTargetType, g.ID, g.Name)
}

// settingsAudit is the administrator settings as their events compare
// them: AdminSettings with the factor config ids as digit strings, as every
// id of an event (a JSON number would not hold them exactly).
type settingsAudit struct {
	PasswordlessEnabledForNPSVPN bool                             `json:"passwordless_enabled_for_nps_vpn"`
	CaptchaType                  string                           `json:"captcha_type"`
	AccountBlocking              identity.AccountBlockingSettings `json:"account_blocking_settings"`
	OfflineMFA                   offlineMFAAudit                  `json:"offline_mfa_settings"`
}

type offlineMFAAudit struct {
	IsEnabled               bool              `json:"is_enabled"`
	DevicesAssignment       DevicesAssignment `json:"devices_assignment"`
	Actions                 []string          `json:"actions"`
	SecondaryAuthentication struct {
		NoOfRequiredFactors int                 `json:"no_of_required_factors"`
		FactorConfigs       []factorConfigAudit `json:"factor_configs"`
	} `json:"secondary_authentication"`
	OfflineVerificationDuration DurationSetting `json:"offline_verification_duration"`
	BypassMFAConnectionError    bool            `json:"bypass_mfa_connection_error"`
}

type factorConfigAudit struct {
	AuthnFactorConfigID int64 `json:"authn_factor_config_id,string"`
	VerificationOrder   int   `json:"verification_order"`
	IsMandatory         bool  `json:"is_mandatory"`
}

func settingsSnapshot(s *AdminSettings) json.RawMessage {
	o := s.OfflineMFA
	v := settingsAudit{PasswordlessEnabledForNPSVPN: s.PasswordlessEnabledForNPSVPN, CaptchaType: s.CaptchaType, AccountBlocking: s.AccountBlocking,
		OfflineMFA: offlineMFAAudit{IsEnabled: o.IsEnabled, DevicesAssignment: o.DevicesAssignment, Actions: o.Actions,
			OfflineVerificationDuration: o.OfflineVerificationDuration, BypassMFAConnectionError: o.BypassMFAConnectionError}}
	v.OfflineMFA.SecondaryAuthentication.NoOfRequiredFactors = o.SecondaryAuthentication.NoOfRequiredFactors
	v.OfflineMFA.SecondaryAuthentication.FactorConfigs = make([]factorConfigAudit, len(o.SecondaryAuthentication.FactorConfigs))
	for i, f := range o.SecondaryAuthentication.FactorConfigs {
		v.OfflineMFA.SecondaryAuthentication.FactorConfigs[i] = factorConfigAudit(f)
	}
	return snapshot(v)
}

// adminSettingsTarget is the organization's administrator settings.
func adminSettingsTarget(orgID int64) models.EventTarget {
	return audit.Target(AdminSettingsTargetType, orgID, "Administrator settings")
}
