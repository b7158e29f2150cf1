package notification

import (
	"context"
	"encoding/json"

	"iam/models"
	"iam/models/audit"
)

// The audit events of notifications: every change to templates and
// schedules records its event (models.Record) inside the transaction that
// makes it. An update's changes compare the entity as the API shows it (its
// JSON names): a template's files by id and name, never their bytes.
// Notification runs and their deliveries are a job's work: the job's
// lifecycle events and its results tell of them, not events of their own;
// an administrator's asking for a run now records schedule.run_requested
// (RequestRun).

// Target types of notifications' events.
const (
	TemplateTargetType = "template"
	ScheduleTargetType = "schedule"
)

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

// templateAudit is a template as its events compare it.
type templateAudit struct {
	Name           string                 `json:"name"`
	Description    string                 `json:"description"`
	ShareType      string                 `json:"share_type"`
	Module         string                 `json:"module"`
	IsDefault      bool                   `json:"is_default"`
	Configurations TemplateConfigurations `json:"configurations"`
	Mail           *MailTemplate          `json:"mail"`
	SMS            *SMSTemplate           `json:"sms"`
}

func templateSnapshot(t *Template) json.RawMessage {
	return snapshot(templateAudit{Name: t.Name, Description: t.Description, ShareType: t.ShareType, Module: t.Module,
		IsDefault: t.IsDefault, Configurations: t.Configurations, Mail: t.Mail, SMS: t.SMS})
}

func templateTarget(t *Template) models.EventTarget {
	return audit.Target(TemplateTargetType, t.ID, t.Name)
}

// scheduleAudit is a schedule as its events compare it, its ids as digit
// strings (as every id of an event: a JSON number would not hold them
// exactly).
type scheduleAudit struct {
	Name                   string           `json:"name"`
	Description            string           `json:"description"`
	NotificationTemplateID string           `json:"notification_template_id"`
	Groups                 []string         `json:"groups"`
	IsEnabled              bool             `json:"is_enabled"`
	ScheduleSettings       ScheduleSettings `json:"schedule_settings"`
}

func scheduleSnapshot(sc *NotificationSchedule) json.RawMessage {
	groups := make([]string, len(sc.GroupIDs))
	for i, id := range sc.GroupIDs {
		groups[i] = models.FormatID(id)
	}
	return snapshot(scheduleAudit{Name: sc.Name, Description: sc.Description, NotificationTemplateID: models.FormatID(sc.TemplateID),
		Groups: groups, IsEnabled: sc.IsEnabled, ScheduleSettings: sc.Settings})
}

func scheduleTarget(sc *NotificationSchedule) models.EventTarget {
	return audit.Target(ScheduleTargetType, sc.ID, sc.Name)
}

// recordScheduleUpdate records what an update of a schedule from prev
// (its snapshot) to next did: schedule.paused or schedule.resumed when it
// turned is_enabled off or on, and schedule.updated with the other fields
// it changed (also when it changed none at all).
func recordScheduleUpdate(ctx context.Context, prev json.RawMessage, next *NotificationSchedule) error {
	var enabled, others []models.FieldChange
	for _, c := range audit.Changes(prev, scheduleSnapshot(next)) {
		if c.Field == "is_enabled" {
			enabled = append(enabled, c)
		} else {
			others = append(others, c)
		}
	}
	if len(others) > 0 || len(enabled) == 0 {
		t := scheduleTarget(next)
		t.Changes = others
		if err := record(ctx, next.OrgID, audit.ScheduleUpdated, t); err != nil {
			return err
		}
	}
	if len(enabled) == 0 {
		return nil
	}
	typ := audit.ScheduleResumed
	if !next.IsEnabled {
		typ = audit.SchedulePaused
	}
	t := scheduleTarget(next)
	t.Changes = enabled
	return record(ctx, next.OrgID, typ, t)
}
