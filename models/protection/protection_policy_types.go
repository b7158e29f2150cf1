package protection

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"time"

	"github.com/uptrace/bun"
)

// RefID is an id inside a JSON document: written as a digit string, as
// every id of the API, and read from a digit string or a JSON number (the
// spec shows some ids of policies as integers).
type RefID int64

// MarshalJSON writes the id as a digit string.
func (r RefID) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatInt(int64(r), 10) + `"`), nil
}

// UnmarshalJSON reads a digit string or an integer.
func (r *RefID) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || len(b) == 0 || (b[0] == '"') != (b[len(b)-1] == '"') {
		return &json.UnmarshalTypeError{Value: "id " + string(b), Type: reflect.TypeFor[RefID]()}
	}
	*r = RefID(n)
	return nil
}

// uniqueRefIDs returns ids without repeats, in the order first given (never
// nil).
func uniqueRefIDs(ids []RefID) []RefID {
	out := make([]RefID, 0, len(ids))
	seen := make(map[RefID]bool, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// refIDs returns ids as int64.
func refIDs(ids []RefID) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

// Policy endpoints (spec 2.11) and the endpoint setting types.
const (
	EndpointComputerDevices = "ComputerDevices"
	EndpointNPS             = "NPS"
	EndpointIIS             = "IIS"
	EndpointSSOApplications = "SSOApplications"
	EndpointIdentityServer  = "IdentityServer"

	EndpointTypeComputerDevices  = "ComputerDevices"
	EndpointTypeNPSVPN           = "NPS_VPN"
	EndpointTypeIIS              = "IIS"
	EndpointTypeSSOApplications  = "SSOApplications"
	EndpointTypeLogin            = "Login"
	EndpointTypeSensitiveActions = "SensitiveActions"

	// AllEndpoints is what a list item shows for a policy covering every
	// endpoint.
	AllEndpoints = "All Endpoints"
)

// Endpoints lists the endpoints in the spec's order.
var Endpoints = []string{EndpointComputerDevices, EndpointNPS, EndpointIIS, EndpointSSOApplications, EndpointIdentityServer}

// EndpointTypes gives the types each endpoint's setting may have; the first
// is the one filled in when a request leaves type out.
var EndpointTypes = map[string][]string{
	EndpointComputerDevices: {EndpointTypeComputerDevices},
	EndpointNPS:             {EndpointTypeNPSVPN},
	EndpointIIS:             {EndpointTypeIIS},
	EndpointSSOApplications: {EndpointTypeSSOApplications},
	EndpointIdentityServer:  {EndpointTypeLogin, EndpointTypeSensitiveActions},
}

// EndpointActions gives the actions each endpoint type allows. A type
// listed here needs at least one action; the other types take none (their
// one action is the sign-in itself).
var EndpointActions = map[string][]string{
	EndpointTypeComputerDevices:  {"InteractiveLogon", "MachineUnlock", "RDP", "SSH", "UAC", "Sudo"},
	EndpointTypeSensitiveActions: {"delete_users", "delete_groups", "delete_directories", "delete_applications", "admin_dashboard_enrollment"},
}

// Policy factor types of conditions and the config family each names.
const (
	FactorTypeIPAddress   = "ipaddress"
	FactorTypeGeolocation = "geolocation"
	FactorTypeTime        = "time"
)

// ConditionFamilies maps a condition's factor type to its config family.
var ConditionFamilies = map[string]ConfigFamily{
	FactorTypeIPAddress:   FamilyIPSources,
	FactorTypeGeolocation: FamilyGeolocations,
	FactorTypeTime:        FamilyBusinessHours,
}

// Condition comparators and access types.
const (
	ComparatorIn    = "in"
	ComparatorNotIn = "not_in"
	AccessAllow     = "allow"
	AccessDeny      = "deny"
)

// PolicyCondition is one condition of a policy. It holds when the request's
// value (address, its location, the time) is in (comparator in) or not in
// (not_in) one of the configs named; include_all_trusted_sources (ipaddress
// only) adds every IP source config marked trusted, now and later.
type PolicyCondition struct {
	SequenceNumber           int     `json:"sequence_number"`
	FactorType               string  `json:"factor_type"`
	Comparator               string  `json:"comparator"`
	FactorConfigs            []RefID `json:"factor_configs"`
	IncludeAllTrustedSources bool    `json:"include_all_trusted_sources"`
}

// AccessConditions are a policy's conditions and the expression over their
// sequence numbers (package criteria). No conditions: the policy applies to
// every request of its users, and the expression is empty.
type AccessConditions struct {
	CriteriaExpression string            `json:"criteria_expression"`
	Conditions         []PolicyCondition `json:"conditions"`
}

// UserAssignments name the users and groups a policy applies to. The counts
// are of those that still exist, in responses only.
type UserAssignments struct {
	UserIDs     []RefID `json:"user_ids"`
	GroupIDs    []RefID `json:"group_ids"`
	UsersCount  int     `json:"users_count"`
	GroupsCount int     `json:"groups_count"`
}

// DeviceAssignment names the devices a ComputerDevices setting protects:
// devices, device groups, or every device.
type DeviceAssignment struct {
	DeviceIDs               []RefID `json:"device_ids"`
	GroupIDs                []RefID `json:"group_ids"`
	AllDevicesGroupSelected bool    `json:"all_devices_group_selected"`
}

// AppAssignment names the applications (OAuth clients) an SSOApplications
// setting covers.
type AppAssignment struct {
	AppIDs []string `json:"app_ids"`
}

// PrimaryFactor is a factor config of primary authentication.
type PrimaryFactor struct {
	AuthnFactorConfigID RefID `json:"authn_factor_config_id"`
	VerificationOrder   int   `json:"verification_order"`
}

// SecondaryFactor is a factor config of secondary authentication.
type SecondaryFactor struct {
	AuthnFactorConfigID RefID `json:"authn_factor_config_id"`
	VerificationOrder   int   `json:"verification_order"`
	IsMandatory         bool  `json:"is_mandatory"`
}

// PrimaryAuthentication is how the user signs in first.
type PrimaryAuthentication struct {
	IsPasswordlessEnabled bool            `json:"is_passwordless_enabled"`
	FactorConfigs         []PrimaryFactor `json:"factor_configs"`
}

// SecondaryAuthentication is the MFA a setting asks for.
type SecondaryAuthentication struct {
	IsMFAEnabled        bool              `json:"is_mfa_enabled"`
	NoOfRequiredFactors int               `json:"no_of_required_factors"`
	AuthnMode           string            `json:"authn_mode"`
	FactorConfigs       []SecondaryFactor `json:"factor_configs"`
}

// TrustDuration is how long an MFA trust lasts.
type TrustDuration struct {
	Value int    `json:"value"`
	Unit  string `json:"unit"`
}

// MFATrust lets a verified device skip MFA for a while.
type MFATrust struct {
	IsEnabled     bool          `json:"is_enabled"`
	InitiatorType string        `json:"initiator_type"`
	Duration      TrustDuration `json:"duration"`
}

// RadiusAttribute is one attribute of an NPS setting's RADIUS answer.
type RadiusAttribute struct {
	Type     string `json:"type"`
	Number   int    `json:"number"`
	DataType string `json:"data_type"`
	Value    string `json:"value"`
}

// RadiusResponseConfig is what an NPS setting adds to its RADIUS answer.
type RadiusResponseConfig struct {
	VendorID       string            `json:"vendor_id"`
	AttributesList []RadiusAttribute `json:"attributes_list"`
}

// TemplateRef names a notification template in responses.
type TemplateRef struct {
	ID   RefID  `json:"id"`
	Name string `json:"name"`
}

// EndpointAdvancedSettings are a setting's MFA details. MFATimeout is in
// seconds.
type EndpointAdvancedSettings struct {
	MFATimeout             int                   `json:"mfa_timeout"`
	MFAUnenrolledAction    string                `json:"mfa_unenrolled_action"`
	MFATrust               MFATrust              `json:"mfa_trust"`
	RadiusResponseConfig   *RadiusResponseConfig `json:"radius_response_config,omitempty"`
	NotificationTemplateID *RefID                `json:"notification_template_id,omitempty"`
	// NotificationTemplate is filled on read (responses only).
	NotificationTemplate *TemplateRef `json:"notification_template,omitempty"`
}

// EndpointSetting is what a policy asks of one endpoint.
type EndpointSetting struct {
	Endpoint                string                   `json:"endpoint"`
	Type                    string                   `json:"type"`
	DeviceAssignment        *DeviceAssignment        `json:"device_assignment,omitempty"`
	AppAssignment           *AppAssignment           `json:"app_assignment,omitempty"`
	Actions                 []string                 `json:"actions"`
	PrimaryAuthentication   PrimaryAuthentication    `json:"primary_authentication"`
	SecondaryAuthentication SecondaryAuthentication  `json:"secondary_authentication"`
	AdvancedSettings        EndpointAdvancedSettings `json:"advanced_settings"`
}

// PolicyAdvancedSettings are the policy's captcha, backup-code and
// contact-selection settings.
type PolicyAdvancedSettings struct {
	IsCaptchaEnabled               bool   `json:"is_captcha_enabled"`
	CaptchaFrequencyType           string `json:"captcha_frequency_type"`
	CaptchaFailedAttemptsThreshold int    `json:"captcha_failed_attempts_threshold"`
	IsBackupCodesEnabled           bool   `json:"is_backup_codes_enabled"`
	EmailaddressSelectionMode      string `json:"emailaddress_selection_mode"`
	MobilenoSelectionMode          string `json:"mobileno_selection_mode"`
}

// Policy is a conditional access policy (spec 2.11). Priority 1 is
// evaluated first; the organization's default policy is always last.
type Policy struct {
	bun.BaseModel `bun:"table:ca_policies,alias:p"`

	ID                 int64                  `bun:"id,pk"`
	OrgID              int64                  `bun:"org_id"`
	Name               string                 `bun:"name"`
	Description        string                 `bun:"description"`
	IsEnabled          bool                   `bun:"is_enabled"`
	IsDefault          bool                   `bun:"is_default"`
	Priority           int64                  `bun:"priority"`
	AccessType         string                 `bun:"access_type"`
	CriteriaExpression string                 `bun:"criteria_expression"`
	EndpointsSettings  []EndpointSetting      `bun:"endpoints_settings,type:json"`
	AdvancedSettings   PolicyAdvancedSettings `bun:"advanced_settings,type:json"`
	CreatedAt          time.Time              `bun:"created_at"`
	UpdatedAt          time.Time              `bun:"updated_at"`
	// UpdatedBy is the user who last changed the policy (0: a client of
	// its own); UpdatedByName their email, or the client's id.
	UpdatedBy     int64  `bun:"updated_by"`
	UpdatedByName string `bun:"updated_by_name"`

	// Conditions are the policy's conditions by sequence number (rows of
	// ca_policy_conditions and ca_policy_condition_configs).
	Conditions []PolicyCondition `bun:"-"`
	// UserIDs and GroupIDs are the users and groups assigned, ascending.
	// On read they hold only those that still exist.
	UserIDs  []int64 `bun:"-"`
	GroupIDs []int64 `bun:"-"`
}

// Endpoints returns the endpoints the policy's settings cover, in the
// order of Endpoints.
func (p *Policy) Endpoints() []string {
	out := []string{}
	for _, e := range Endpoints {
		for _, s := range p.EndpointsSettings {
			if s.Endpoint == e {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// IsAgentRequired reports whether enforcing the policy needs an agent: a
// device agent (ComputerDevices), the NPS extension (NPS) or the IIS module
// (IIS).
func (p *Policy) IsAgentRequired() bool {
	for _, s := range p.EndpointsSettings {
		switch s.Endpoint {
		case EndpointComputerDevices, EndpointNPS, EndpointIIS:
			return true
		}
	}
	return false
}

// Setting returns the policy's setting of an endpoint, or nil.
func (p *Policy) Setting(endpoint string) *EndpointSetting {
	for i := range p.EndpointsSettings {
		if p.EndpointsSettings[i].Endpoint == endpoint {
			return &p.EndpointsSettings[i]
		}
	}
	return nil
}
