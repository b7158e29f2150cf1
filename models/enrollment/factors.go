package enrollment

import (
	"context"
	"fmt"
	"iam/models"
	"iam/models/sqldb"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// FactorType is the kind of an authentication factor config.
type FactorType string

// The factor types every organization has a config of (seeded on first use).
const (
	FactorEmailOTP  FactorType = "EMAIL_OTP"
	FactorSMSOTP    FactorType = "SMS_OTP"
	FactorTOTP      FactorType = "TOTP"
	FactorSmartCard FactorType = "SMART_CARD"
)

// CSV columns of quick enrollment. A file identifies each user by exactly
// one of the user columns; each chosen factor config adds its own columns.
const (
	ColumnPrimaryEmail = "Primary Email"
	ColumnEmployeeID   = "Employee ID"
	ColumnMobileNumber = "Mobile Number"
	ColumnOTPEmail     = "Email Address"
	ColumnTOTPSecret   = "TOTP Secret"
	ColumnCertificate  = "Certificate"
)

// UserColumns are the columns that may identify the user of a CSV row, in
// order of preference for the sample file.
var UserColumns = []string{ColumnPrimaryEmail, ColumnEmployeeID}

// FactorSpec describes a factor type: its default display name, the CSV
// columns its enrollment data comes from, and an example value of each.
type FactorSpec struct {
	Type        FactorType
	DisplayName string
	Columns     []string
	Examples    []string
}

// FactorSpecs lists the seeded factor types in display order.
var FactorSpecs = []FactorSpec{
	{FactorEmailOTP, "Email OTP", []string{ColumnOTPEmail}, []string{"jane.doe@example.com"}},
	{FactorSMSOTP, "SMS OTP", []string{ColumnMobileNumber}, []string{"+14155550123"}},
	{FactorTOTP, "TOTP Authenticator", []string{ColumnTOTPSecret}, []string{"JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"}},
	{FactorSmartCard, "Smart Card (Certificate)", []string{ColumnCertificate}, []string{"MIIB...base64 DER or PEM of the certificate"}},
}

// SpecOf returns the spec of a factor type.
func SpecOf(t FactorType) (FactorSpec, bool) {
	for _, s := range FactorSpecs {
		if s.Type == t {
			return s, true
		}
	}
	return FactorSpec{}, false
}

// FactorConfig is an organization's authentication factor config (spec
// 2.10 names it only by id; its other fields are the service's).
type FactorConfig struct {
	bun.BaseModel `bun:"table:authn_factor_configs"`

	ID          int64      `bun:"id,pk"`
	OrgID       int64      `bun:"org_id"`
	Type        FactorType `bun:"factor_type"`
	DisplayName string     `bun:"display_name"`
	IsEnabled   bool       `bun:"is_enabled"`
	CreatedAt   time.Time  `bun:"created_at"`
}

// Columns returns the CSV columns the config's enrollment data comes from.
func (c *FactorConfig) Columns() []string {
	spec, _ := SpecOf(c.Type)
	return spec.Columns
}

// FactorStore reads the authentication factor configs, seeding each
// organization's on first use.
type FactorStore struct{ db bun.IDB }

// NewFactorStore returns the FactorStore over db (the database or a transaction).
func NewFactorStore(db bun.IDB) *FactorStore { return &FactorStore{db: db} }

// List returns the organization's factor configs in display order, seeding
// the missing ones first (idempotent: concurrent callers see the same ids).
func (s *FactorStore) List(ctx context.Context, orgID int64) ([]FactorConfig, error) {
	configs, err := s.list(ctx, orgID)
	if err != nil {
		return nil, err
	}
	if len(configs) >= len(FactorSpecs) {
		return configs, nil
	}
	if err := s.seed(ctx, orgID); err != nil {
		return nil, err
	}
	return s.list(ctx, orgID)
}

func (s *FactorStore) list(ctx context.Context, orgID int64) ([]FactorConfig, error) {
	var configs []FactorConfig
	if err := s.db.NewSelect().Model(&configs).Where("org_id = ?", orgID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("select factor configs: %w", err)
	}
	order := make(map[FactorType]int, len(FactorSpecs))
	for i, spec := range FactorSpecs {
		order[spec.Type] = i
	}
	sort.Slice(configs, func(i, j int) bool { return order[configs[i].Type] < order[configs[j].Type] })
	return configs, nil
}

func (s *FactorStore) seed(ctx context.Context, orgID int64) error {
	now := time.Now().UTC()
	rows := make([]FactorConfig, len(FactorSpecs))
	for i, spec := range FactorSpecs {
		rows[i] = FactorConfig{ID: sqldb.NewID(), OrgID: orgID, Type: spec.Type, DisplayName: spec.DisplayName, IsEnabled: true, CreatedAt: now}
	}
	_, err := s.db.NewInsert().Model(&rows).On("CONFLICT (org_id, factor_type) DO NOTHING").Exec(ctx)
	if err != nil {
		return fmt.Errorf("seed factor configs: %w", err)
	}
	return nil
}

// Resolve returns the configs named by ids, in the order given, without
// repeats. EINVALID (field factor_configs) when ids is empty or names a
// config the organization does not have.
func (s *FactorStore) Resolve(ctx context.Context, orgID int64, ids []int64) ([]FactorConfig, error) {
	if len(ids) == 0 {
		return nil, models.Invalid("factor_configs", "name at least one factor config id (GET /protection/authnfactor-configs lists them)")
	}
	all, err := s.List(ctx, orgID)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]FactorConfig, len(all))
	for _, c := range all {
		byID[c.ID] = c
	}
	var out []FactorConfig
	seen := map[int64]bool{}
	var unknown []string
	for _, id := range ids {
		c, ok := byID[id]
		switch {
		case !ok:
			unknown = append(unknown, models.FormatID(id))
		case !seen[id]:
			seen[id] = true
			out = append(out, c)
		}
	}
	if len(unknown) > 0 {
		return nil, models.Invalid("factor_configs", "no factor config with id %s", strings.Join(unknown, ", "))
	}
	return out, nil
}
