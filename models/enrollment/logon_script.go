package enrollment

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/sqldb"
	"time"

	"github.com/uptrace/bun"
)

// LogonScriptConfig is the reminder a logon script shows users who have not
// enrolled yet (spec 2.14). Every field is text; ForceEnrollment is "true"
// or "false".
type LogonScriptConfig struct {
	bun.BaseModel `bun:"table:logon_script_configs"`

	OrgID              int64     `bun:"org_id,pk" json:"-"`
	WindowTitle        string    `bun:"window_title" json:"window_title"`
	WindowContent      string    `bun:"window_content" json:"window_content"`
	EnrollmentButton   string    `bun:"enrollment_button" json:"enrollment_button"`
	CancellationButton string    `bun:"cancellation_button" json:"cancellation_button"`
	ForceEnrollment    string    `bun:"force_enrollment" json:"force_enrollment"`
	UpdatedAt          time.Time `bun:"updated_at" json:"-"`
}

// DefaultLogonScriptConfig is what an organization that never saved its
// configuration gets.
func DefaultLogonScriptConfig(orgID int64) *LogonScriptConfig {
	return &LogonScriptConfig{
		OrgID:              orgID,
		WindowTitle:        "Enroll for multi-factor authentication",
		WindowContent:      "Your organization asks you to enroll your authentication factors. It takes a minute.",
		EnrollmentButton:   "Enroll now",
		CancellationButton: "Remind me later",
		ForceEnrollment:    "false",
	}
}

// LogonScriptStore reads and writes logon-script configurations.
type LogonScriptStore struct{ db bun.IDB }

// NewLogonScriptStore returns the LogonScriptStore over db (the database or a transaction).
func NewLogonScriptStore(db bun.IDB) *LogonScriptStore { return &LogonScriptStore{db: db} }

// Get returns the organization's configuration, or the default one.
func (s *LogonScriptStore) Get(ctx context.Context, orgID int64) (*LogonScriptConfig, error) {
	return getLogonScript(ctx, s.db, orgID)
}

func getLogonScript(ctx context.Context, db bun.IDB, orgID int64) (*LogonScriptConfig, error) {
	cfg := new(LogonScriptConfig)
	err := db.NewSelect().Model(cfg).Where("org_id = ?", orgID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return DefaultLogonScriptConfig(orgID), nil
	}
	if err != nil {
		return nil, fmt.Errorf("select logon script config: %w", err)
	}
	return cfg, nil
}

// Update reads the organization's configuration, lets change edit it, and
// stores the result in one transaction with logon_script.updated (the
// fields that changed). change returns an error to store nothing (EINVALID
// for a broken rule).
func (s *LogonScriptStore) Update(ctx context.Context, orgID int64, change func(*LogonScriptConfig) error) (*LogonScriptConfig, error) {
	var out *LogonScriptConfig
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		cfg, err := getLogonScript(ctx, tx, orgID)
		if err != nil {
			return err
		}
		before := *cfg
		if err = change(cfg); err != nil {
			return err
		}
		if cfg.ForceEnrollment != "true" && cfg.ForceEnrollment != "false" {
			return models.Invalid("force_enrollment", `must be the text "true" or "false"`)
		}
		cfg.OrgID, cfg.UpdatedAt = orgID, time.Now().UTC()
		_, err = tx.NewInsert().Model(cfg).On("CONFLICT (org_id) DO UPDATE").Exec(ctx)
		if err != nil {
			return fmt.Errorf("upsert logon script config: %w", err)
		}
		out = cfg
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.LogonScriptUpdated,
			Targets: []models.EventTarget{{Type: LogonScriptTargetType, ID: models.FormatID(orgID),
				DisplayName: "Logon script configuration", Changes: audit.Changes(before, *cfg)}}})
	})
	return out, err
}
