package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"iam/models/audit"
	"iam/models/store"
)

// Audit seals the organizations' audit events into signed digests and
// prunes them past their retention (the AuditSeal and AuditRetention
// workflows, on schedules).
type Audit struct {
	Store *store.Store
	// Signer signs the digests (IAM_AUDIT_SIGNING_KEY); nil seals nothing.
	Signer *audit.Signer
	// Retention is how long events are kept (IAM_AUDIT_RETENTION).
	Retention time.Duration
}

// AuditedOrgs lists the organizations that have audit events.
func (a *Audit) AuditedOrgs(ctx context.Context) ([]int64, error) {
	return a.Store.Digests.Orgs(ctx)
}

// SealAuditEvents seals the organization's events committed since its last
// digest, returning how many it sealed (0: none new, or no signing key).
func (a *Audit) SealAuditEvents(ctx context.Context, orgID int64) (int64, error) {
	if a.Signer == nil {
		activity.GetLogger(ctx).Warn("no audit signing key (IAM_AUDIT_SIGNING_KEY): audit events are not sealed")
		return 0, nil
	}
	d, err := a.Store.Digests.Seal(ctx, orgID, a.Signer, time.Now())
	if err != nil || d == nil {
		return 0, err
	}
	return d.EventCount, nil
}

// PruneAuditEvents deletes the organization's sealed events older than the
// retention, returning how many it deleted.
func (a *Audit) PruneAuditEvents(ctx context.Context, orgID int64) (int64, error) {
	if a.Retention <= 0 {
		return 0, nil
	}
	return a.Store.Digests.Prune(ctx, orgID, time.Now().Add(-a.Retention))
}
