package audit

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"

	"iam/models"
)

// The event types: the catalogue docs/audit.md documents, each written by
// the change it names. A bulk job writes its own lifecycle (job.*); its
// rows' outcomes stay in the job's results.
const (
	OrgCreated = "org.created"

	UserCreated         = "user.created"
	UserUpdated         = "user.updated"
	UserDeleted         = "user.deleted"
	UserPasswordChanged = "user.password_changed"

	GroupCreated        = "group.created"
	GroupUpdated        = "group.updated"
	GroupDeleted        = "group.deleted"
	GroupMembersAdded   = "group.members_added"
	GroupMembersRemoved = "group.members_removed"

	DeviceRegistered          = "device.registered"
	DeviceDeleted             = "device.deleted"
	DeviceAccountLinkRequest  = "device.account.link_requested"
	DeviceAccountLinked       = "device.account.linked"
	DeviceAccountLinkCanceled = "device.account.link_canceled"
	DeviceAccountUnlinked     = "device.account.unlinked"
	DeviceOfflineUserRemoved  = "device.offline_user.removed"
	LinkingSettingsUpdated    = "device.linking_settings.updated"
	AgentInstallKeyRegenerate = "agent.install_key_regenerated"

	PolicyCreated         = "policy.created"
	PolicyUpdated         = "policy.updated"
	PolicyDeleted         = "policy.deleted"
	PolicyPriorityChanged = "policy.priority_changed"

	ConditionConfigCreated = "condition_config.created"
	ConditionConfigUpdated = "condition_config.updated"
	ConditionConfigDeleted = "condition_config.deleted"

	DeviceGroupCreated        = "device_group.created"
	DeviceGroupUpdated        = "device_group.updated"
	DeviceGroupDeleted        = "device_group.deleted"
	DeviceGroupMembersAdded   = "device_group.members_added"
	DeviceGroupMembersRemoved = "device_group.members_removed"

	AdminSettingsUpdated = "admin_settings.updated"

	CAConfigCreated = "ca_config.created"
	CAConfigUpdated = "ca_config.updated"
	CAConfigDeleted = "ca_config.deleted"

	LogonScriptUpdated = "logon_script.updated"

	TemplateCreated = "template.created"
	TemplateUpdated = "template.updated"
	TemplateDeleted = "template.deleted"

	ScheduleCreated = "schedule.created"
	ScheduleUpdated = "schedule.updated"
	ScheduleDeleted = "schedule.deleted"
	SchedulePaused  = "schedule.paused"
	ScheduleResumed = "schedule.resumed"
	// ScheduleRunRequested: an administrator asked for a run now
	// (run-now); the run itself is the schedule's work, like its
	// scheduled runs, and records none.
	ScheduleRunRequested = "schedule.run_requested"

	JobQueued    = "job.queued"
	JobStarted   = "job.started"
	JobCompleted = "job.completed"
	JobFailed    = "job.failed"
	JobCanceled  = "job.canceled"
	JobDeleted   = "job.deleted"

	ManagementViewColumnsUpdated = "management.view_columns_updated"
	ManagementUploadCreated      = "management.upload_created"
	ManagementUploadDataDeleted  = "management.upload_data_deleted"
	ManagementExecutionStarted   = "management.execution_started"
	ManagementExecutionRetried   = "management.execution_retried"

	OAuthClientCreated   = "oauth.client.created"
	OAuthClientDeleted   = "oauth.client.deleted"
	OAuthSigninSucceeded = "oauth.signin.succeeded"
	OAuthSigninFailed    = "oauth.signin.failed"
	OAuthTokenIssued     = "oauth.token.issued"  //nolint:gosec // G101: an event type's name, not a credential
	OAuthTokenRevoked    = "oauth.token.revoked" //nolint:gosec // G101: an event type's name, not a credential
	AccessDenied         = "access.denied"

	// Event hooks (models/hooks): their changes, a test an administrator
	// asked for, a delivery retried by hand, and a hook disabled after
	// failing for days.
	EventHookCreated         = "event_hook.created"
	EventHookUpdated         = "event_hook.updated"
	EventHookDeleted         = "event_hook.deleted"
	EventHookSecretRotated   = "event_hook.secret_rotated" //nolint:gosec // G101: an event type's name, not a credential
	EventHookDisabled        = "event_hook.disabled"
	EventHookTestRequested   = "event_hook.test_requested"
	EventHookDeliveryRetried = "event_hook.delivery_retried"
	// ProvisioningTokenCreated and ProvisioningTokenRevoked: an
	// administrator creates or revokes a SCIM provisioning token (its
	// value never shown).
	ProvisioningTokenCreated = "provisioning_token.created" //nolint:gosec // G101: an event type's name, not a credential
	ProvisioningTokenRevoked = "provisioning_token.revoked" //nolint:gosec // G101: an event type's name, not a credential
)

// Types returns every event type of the catalogue, sorted.
func Types() []string {
	out := slices.Clone(catalogue)
	sort.Strings(out)
	return out
}

var catalogue = []string{
	OrgCreated, UserCreated, UserUpdated, UserDeleted, UserPasswordChanged,
	GroupCreated, GroupUpdated, GroupDeleted, GroupMembersAdded, GroupMembersRemoved,
	DeviceRegistered, DeviceDeleted, DeviceAccountLinkRequest, DeviceAccountLinked, DeviceAccountLinkCanceled,
	DeviceAccountUnlinked, DeviceOfflineUserRemoved, LinkingSettingsUpdated, AgentInstallKeyRegenerate,
	PolicyCreated, PolicyUpdated, PolicyDeleted, PolicyPriorityChanged,
	ConditionConfigCreated, ConditionConfigUpdated, ConditionConfigDeleted,
	DeviceGroupCreated, DeviceGroupUpdated, DeviceGroupDeleted, DeviceGroupMembersAdded, DeviceGroupMembersRemoved,
	AdminSettingsUpdated, CAConfigCreated, CAConfigUpdated, CAConfigDeleted, LogonScriptUpdated,
	TemplateCreated, TemplateUpdated, TemplateDeleted,
	ScheduleCreated, ScheduleUpdated, ScheduleDeleted, SchedulePaused, ScheduleResumed, ScheduleRunRequested,
	JobQueued, JobStarted, JobCompleted, JobFailed, JobCanceled, JobDeleted,
	ManagementViewColumnsUpdated, ManagementUploadCreated, ManagementUploadDataDeleted,
	ManagementExecutionStarted, ManagementExecutionRetried,
	OAuthClientCreated, OAuthClientDeleted, OAuthSigninSucceeded, OAuthSigninFailed, OAuthTokenIssued, OAuthTokenRevoked,
	AccessDenied,
	EventHookCreated, EventHookUpdated, EventHookDeleted, EventHookSecretRotated, EventHookDisabled,
	EventHookTestRequested, EventHookDeliveryRetried,
	ProvisioningTokenCreated, ProvisioningTokenRevoked,
}

// Target returns the target of type typ with id and display name.
func Target(typ string, id int64, name string) models.EventTarget {
	return models.EventTarget{Type: typ, ID: models.FormatID(id), DisplayName: name}
}

// secretWords mark a field whose values never appear in an event, only
// that it changed.
var secretWords = []string{"password", "secret", "token", "key", "seed", "hash"}

// Changes returns the fields whose values differ between before and after
// (two values of one struct type, or maps), by their JSON names, in name
// order. Fields JSON leaves out (json:"-") never appear; a field whose name
// says it holds a secret appears with Secret set and no values.
func Changes(before, after any) []models.FieldChange {
	if reflect.TypeOf(before) != reflect.TypeOf(after) {
		return nil
	}
	if a, ok := before.(map[string]any); ok {
		b := after.(map[string]any)
		return fieldChanges(differingNames(a, b), func(name string) (json.RawMessage, json.RawMessage) {
			return encodedValue(a, name), encodedValue(b, name)
		})
	}
	a, b := fieldsOf(before), fieldsOf(after)
	names := make([]string, 0, len(a)+len(b))
	for k := range a {
		names = append(names, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			names = append(names, k)
		}
	}
	return fieldChanges(names, func(name string) (json.RawMessage, json.RawMessage) { return a[name], b[name] })
}

// fieldChanges returns, in name order, the change of each field named whose
// two encodings (values returns them, nil for none) differ.
func fieldChanges(names []string, values func(name string) (old, nw json.RawMessage)) []models.FieldChange {
	sort.Strings(names)
	var out []models.FieldChange
	for _, name := range names {
		old, nw := values(name)
		if string(old) == string(nw) {
			continue
		}
		c := models.FieldChange{Field: name}
		if isSecretField(name) {
			c.Secret = true
		} else {
			c.Old, c.New = decodeValue(old), decodeValue(nw)
		}
		out = append(out, c)
	}
	return out
}

// differingNames returns the names of the values of two maps (a user's
// view, on every update) that may differ: those only one of them has, and
// those that are not deeply equal (equal values encode alike), so that
// only these are encoded.
func differingNames(before, after map[string]any) []string {
	var names []string
	for k, old := range before {
		nw, ok := after[k]
		if !ok || !reflect.DeepEqual(old, nw) {
			names = append(names, k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			names = append(names, k)
		}
	}
	return names
}

// encodedValue is the JSON of m's value named name; nil when m has none
// (or it has no JSON).
func encodedValue(m map[string]any, name string) json.RawMessage {
	v, ok := m[name]
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func fieldsOf(v any) map[string]json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// decodeValue reads a field's JSON value, numbers as json.Number: an id
// keeps every digit.
func decodeValue(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

// isSecretField reports whether a field's name has a word (between
// underscores, or at a change of case) that says it holds a secret:
// installation_key, clientSecret, but not passwordless_enabled.
func isSecretField(name string) bool {
	var words []string
	start := 0
	for i, r := range name {
		if r == '_' || r == '-' || (i > 0 && r >= 'A' && r <= 'Z') {
			words = append(words, strings.ToLower(name[start:i]))
			start = i
			if r == '_' || r == '-' {
				start = i + 1
			}
		}
	}
	words = append(words, strings.ToLower(name[start:]))
	for _, w := range words {
		if slices.Contains(secretWords, w) {
			return true
		}
	}
	return false
}
