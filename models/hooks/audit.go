package hooks

import (
	"context"

	"iam/models"
	"iam/models/audit"
)

// The audit events of event hooks: every change to a hook records its
// event in the transaction that makes it; the secret appears only as
// changed (secret: true), never its value.

func record(ctx context.Context, orgID int64, typ string, target models.EventTarget) error {
	return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: typ, Targets: []models.EventTarget{target}})
}

func hookTarget(h *Hook) models.EventTarget {
	return audit.Target(TargetType, h.ID, h.URL)
}

// hookAudit is a hook as its events compare it.
type hookAudit struct {
	URL         string   `json:"url"`
	Description string   `json:"description"`
	EventTypes  []string `json:"event_types"`
	Enabled     bool     `json:"enabled"`
}

func snapshotOf(h *Hook) hookAudit {
	return hookAudit{URL: h.URL, Description: h.Description, EventTypes: append([]string(nil), h.EventTypes...), Enabled: h.Enabled}
}
