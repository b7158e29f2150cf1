package devices

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/sqldb"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// AgentInstallation is an installed NPS extension or IIS module: a server
// component, not a device (it has no local accounts and is not listed under
// /devices). It registers with its type's installation key, like the device
// agent, and is counted by agents-info.
type AgentInstallation struct {
	bun.BaseModel `bun:"table:agent_installations"`

	ID           int64           `bun:"id,pk"`
	OrgID        int64           `bun:"org_id"`
	AgentType    string          `bun:"agent_type"`
	Name         string          `bun:"name"`
	SerialNumber string          `bun:"serial_number"`
	DNSHostname  string          `bun:"dns_hostname"`
	AgentVersion string          `bun:"agent_version"`
	Facts        json.RawMessage `bun:"facts,type:json"`
	// SecretHash is the SHA-256 digest of the installation's secret.
	SecretHash   []byte    `bun:"secret_hash"`
	RegisteredAt time.Time `bun:"registered_at"`
	UpdatedAt    time.Time `bun:"updated_at"`
}

// ServerAgent reports whether agentType is a server component (NPS
// extension, IIS module) rather than the device agent.
func ServerAgent(agentType string) bool { return agentType == AgentNPS || agentType == AgentIIS }

// RegisterInstallation admits an NPS extension or IIS module that presents
// its organization's current installation key of its type, and returns the
// installation and its secret (shown once; only its digest is kept). The
// same server registering again (same serial number; same DNS host name,
// without regard to case, when it has none) takes over its row with a new
// secret. EUNAUTHORIZED for a wrong or superseded key (or the key of
// another type); ECONFLICT (DeviceLimitReached) for a new installation
// past r.MaxDevices installations (a *RegistrationRefusal); EINVALID for
// bad facts, agent type or platform (windows).
// Records device.registered with the installation as its target (type
// agent_installation).
func (s *DeviceStore) RegisterInstallation(ctx context.Context, r Registration) (*AgentInstallation, string, error) {
	if !ServerAgent(r.AgentType) {
		return nil, "", models.Invalid("agent_type", "must be %s or %s", AgentNPS, AgentIIS)
	}
	if r.Platform != "windows" {
		return nil, "", models.Invalid("platform", "the %s runs on windows", r.AgentType)
	}
	if err := r.Facts.Validate(); err != nil {
		return nil, "", err
	}
	orgID, err := s.keyOrg(ctx, r.InstallationKey, r.AgentType)
	if err != nil {
		return nil, "", err
	}
	facts, err := json.Marshal(r.Facts)
	if err != nil {
		return nil, "", err
	}
	sec := randomToken()
	hash := sha256.Sum256([]byte(sec))
	now := time.Now().UTC()
	in := &AgentInstallation{ID: sqldb.NewID(), OrgID: orgID, AgentType: r.AgentType, Name: r.Facts.Name,
		SerialNumber: r.Facts.SerialNumber, DNSHostname: r.Facts.DNSHostname, AgentVersion: r.Facts.AgentVersion,
		Facts: facts, SecretHash: hash[:], RegisteredAt: now, UpdatedAt: now}
	if err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		q := tx.NewSelect().Model((*AgentInstallation)(nil)).Column("id", "registered_at").
			Where("org_id = ? AND agent_type = ?", orgID, r.AgentType).OrderExpr("id").Limit(1)
		switch {
		case r.Facts.SerialNumber != "":
			q = q.Where("serial_number = ?", r.Facts.SerialNumber)
		case r.Facts.DNSHostname != "":
			q = q.Where("serial_number = '' AND lower(dns_hostname) = ?", strings.ToLower(r.Facts.DNSHostname))
		default:
			q = nil
		}
		var old []AgentInstallation
		if q != nil {
			if err := s.d.LockRows(q, "UPDATE").Scan(ctx, &old); err != nil {
				return fmt.Errorf("read installations: %w", err)
			}
		}
		if len(old) == 0 {
			all := tx.NewSelect().Table("agent_installations").Where("org_id = ?", orgID)
			if err := s.checkDeviceCap(ctx, tx, orgID, r.MaxDevices, all); err != nil {
				return err
			}
			if _, err := tx.NewInsert().Model(in).Exec(ctx); err != nil {
				return fmt.Errorf("insert installation: %w", err)
			}
			return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.DeviceRegistered,
				Targets: []models.EventTarget{installationTarget(in)}})
		}
		in.ID, in.RegisteredAt = old[0].ID, old[0].RegisteredAt
		if _, err := tx.NewUpdate().Model(in).WherePK().ExcludeColumn("id", "org_id", "agent_type", "registered_at").Exec(ctx); err != nil {
			return fmt.Errorf("take over installation: %w", err)
		}
		target := installationTarget(in)
		target.Changes = []models.FieldChange{{Field: "installation_secret", Secret: true}}
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.DeviceRegistered, Targets: []models.EventTarget{target},
			Reason: "took over the installation: the same server registered again"})
	}); err != nil {
		return nil, "", refusedIn(orgID, err)
	}
	return in, sec, nil
}

// installationTarget is an installation as an event names it (type
// agent_installation; its agent type in its name).
func installationTarget(in *AgentInstallation) models.EventTarget {
	return audit.Target(InstallationTargetType, in.ID, in.Name+" ("+in.AgentType+")")
}

// InstallationCounts counts the organization's NPS extension and IIS
// module installations by agent type.
func (s *DeviceStore) InstallationCounts(ctx context.Context, orgID int64) (map[string]int64, error) {
	var rows []struct {
		AgentType string `bun:"agent_type"`
		N         int64  `bun:"n"`
	}
	if err := s.db.NewSelect().Table("agent_installations").Column("agent_type").ColumnExpr("count(*) AS n").
		Where("org_id = ?", orgID).Group("agent_type").Scan(ctx, &rows); err != nil {
		return nil, models.Unavailable(fmt.Errorf("count installations: %w", err))
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.AgentType] = r.N
	}
	return out, nil
}
