package enrollment

import (
	"bytes"
	"context"
	"crypto/sha1" //nolint:gosec // SHA-1 makes the certificate thumbprint, an identifier Windows shows, not a security check
	"crypto/x509"
	"database/sql"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/identity"
	"iam/models/sqldb"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// CAConfig is a certificate authority of a smart card factor config (spec
// 2.10): smart-card certificates enroll only when an enabled CA of their
// config signed them and the certificate names the user by the CA's mapping
// attribute. A config with no enabled CA accepts certificates unchecked.
type CAConfig struct {
	bun.BaseModel `bun:"table:ca_configs,alias:ca"`

	ID               int64     `bun:"id,pk"`
	OrgID            int64     `bun:"org_id"`
	FactorConfigID   int64     `bun:"factor_config_id"`
	IsEnabled        bool      `bun:"is_enabled"`
	CertDER          []byte    `bun:"cert_der"`
	SubjectName      string    `bun:"subject_name"`
	Thumbprint       string    `bun:"thumbprint"`
	MappingAttribute string    `bun:"mapping_attribute"`
	ExpiresOn        time.Time `bun:"expires_on"`
	AddedTime        time.Time `bun:"added_time"`
	UpdatedAt        time.Time `bun:"updated_at"`
}

// PEM is the CA certificate in PEM form (ca_file).
func (c *CAConfig) PEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.CertDER}))
}

// Certificate mapping attributes: the user attribute a certificate must name
// and where in the certificate it is looked for (values compare ignoring case).
const (
	// MapEmail: the user's email is an rfc822Name of the subject alternative
	// names or the subject's emailAddress.
	MapEmail = "email"
	// MapEmployeeID: the user's employeeID is the subject's serialNumber or
	// common name.
	MapEmployeeID = "employeeID"
	// MapDisplayName: the user's displayName is the subject's common name.
	MapDisplayName = "displayName"
)

// CAMappingAttributes lists the accepted certificate_mapping_attribute values.
var CAMappingAttributes = []string{MapEmail, MapEmployeeID, MapDisplayName}

// Limits of CA configs.
const (
	// MaxCAFileBytes caps a ca_file.
	MaxCAFileBytes = maxCertificateBytes
	// MaxCAsPerFactorConfig caps the CAs of one factor config.
	MaxCAsPerFactorConfig = 100
)

// ErrCAConfigNotFound answers a CA config not under the factor config.
var ErrCAConfigNotFound = models.NotFound("CA Config", "the certificate authority config does not exist")

// ErrFactorConfigNotFound answers a factor config not in the organization.
var ErrFactorConfigNotFound = models.NotFound("Authentication Factor Config", "the authentication factor config does not exist")

// CAInput is a create (File and MappingAttribute required) or a change (nil
// fields stay).
type CAInput struct {
	IsEnabled        *bool
	File             []byte
	MappingAttribute *string
}

// parseCAFile checks a CA file: a certificate, of a CA, valid at now (not
// expired, and not before its NotBefore).
func parseCAFile(data []byte, now time.Time) (*x509.Certificate, error) {
	if len(data) == 0 {
		return nil, models.Invalid("ca_file", "is required: a .cer file, PEM or DER")
	}
	if len(data) > MaxCAFileBytes {
		return nil, &models.Error{Code: models.ETOOLARGE, Field: "ca_file", Detail: fmt.Sprintf("the file is larger than %d KiB", MaxCAFileBytes>>10)}
	}
	info, err := ParseCertificate(data)
	if err != nil {
		return nil, models.Invalid("ca_file", "%v", err)
	}
	cert := info.Cert
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, models.Invalid("ca_file", "%q is not a certificate authority certificate (basic constraints CA:TRUE missing)", cert.Subject.String())
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, models.Invalid("ca_file", "%q may not sign certificates (key usage lacks certificate signing)", cert.Subject.String())
	}
	if !now.Before(cert.NotAfter) {
		return nil, models.Invalid("ca_file", "the certificate authority %q expired on %s", cert.Subject.String(), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(cert.NotBefore) {
		return nil, models.Invalid("ca_file", "the certificate authority %q is not valid yet: it becomes valid on %s", cert.Subject.String(), cert.NotBefore.UTC().Format(time.RFC3339))
	}
	return cert, nil
}

// CAStore keeps the CA configs of smart card factor configs.
type CAStore struct{ db bun.IDB }

// NewCAStore returns the CAStore over db (the database or a transaction).
func NewCAStore(db bun.IDB) *CAStore { return &CAStore{db: db} }

// smartCardConfig checks that factorID is the organization's smart card
// factor config: ENOTFOUND when not the organization's, EINVALID when of
// another type.
func smartCardConfig(ctx context.Context, db bun.IDB, orgID, factorID int64) error {
	fc := new(FactorConfig)
	err := db.NewSelect().Model(fc).Where("org_id = ? AND id = ?", orgID, factorID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrFactorConfigNotFound
	}
	if err != nil {
		return models.Unavailable(fmt.Errorf("select factor config: %w", err))
	}
	if fc.Type != FactorSmartCard {
		return models.Invalid("authnfactor_config_id", "certificate authorities belong to the smart card factor config, not %s", fc.Type)
	}
	return nil
}

func checkMapping(attr string) error {
	if !models.OneOf(attr, CAMappingAttributes) {
		return models.Invalid("certificate_mapping_attribute", "must be one of %s", strings.Join(CAMappingAttributes, ", "))
	}
	return nil
}

func (c *CAConfig) setCert(cert *x509.Certificate) {
	sum := sha1.Sum(cert.Raw) //nolint:gosec // the thumbprint (see the import)
	c.CertDER = cert.Raw
	c.SubjectName = cert.Subject.String()
	c.Thumbprint = strings.ToUpper(hex.EncodeToString(sum[:]))
	c.ExpiresOn = cert.NotAfter.UTC()
}

func errCADuplicate(thumb string) error {
	return &models.Error{Code: models.ECONFLICT, Title: "CA Config Exists", Field: "ca_file",
		Detail: fmt.Sprintf("the certificate authority with thumbprint %s is configured already", thumb)}
}

// Create adds a CA to the organization's smart card factor config factorID,
// and records ca_config.created. IsEnabled defaults to true.
func (s *CAStore) Create(ctx context.Context, orgID, factorID int64, in CAInput) (*CAConfig, error) {
	now := time.Now().UTC()
	cert, err := parseCAFile(in.File, now)
	if err != nil {
		return nil, err
	}
	if in.MappingAttribute == nil {
		return nil, models.Invalid("certificate_mapping_attribute", "is required: one of %s", strings.Join(CAMappingAttributes, ", "))
	}
	if err = checkMapping(*in.MappingAttribute); err != nil {
		return nil, err
	}
	c := &CAConfig{ID: sqldb.NewID(), OrgID: orgID, FactorConfigID: factorID, IsEnabled: true, MappingAttribute: *in.MappingAttribute,
		AddedTime: now, UpdatedAt: now}
	if in.IsEnabled != nil {
		c.IsEnabled = *in.IsEnabled
	}
	c.setCert(cert)
	if err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := smartCardConfig(ctx, tx, orgID, factorID); err != nil {
			return err
		}
		n, err := tx.NewSelect().Model((*CAConfig)(nil)).Where("factor_config_id = ?", factorID).Count(ctx)
		if err != nil {
			return fmt.Errorf("count CA configs: %w", err)
		}
		if n >= MaxCAsPerFactorConfig {
			return models.Errorf(models.ECONFLICT, "a factor config has at most %d certificate authorities", MaxCAsPerFactorConfig)
		}
		if _, err := tx.NewInsert().Model(c).Exec(ctx); err != nil {
			if sqldb.IsUniqueViolation(err) {
				return errCADuplicate(c.Thumbprint)
			}
			return fmt.Errorf("insert CA config: %w", err)
		}
		return c.record(ctx, audit.CAConfigCreated, nil)
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func getCA(ctx context.Context, db bun.IDB, orgID, factorID, id int64) (*CAConfig, error) {
	c := new(CAConfig)
	err := db.NewSelect().Model(c).Where("org_id = ? AND factor_config_id = ? AND id = ?", orgID, factorID, id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrCAConfigNotFound
	}
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("select CA config: %w", err))
	}
	return c, nil
}

// CheckFactor says whether factorID is the organization's smart card factor
// config (ENOTFOUND, or EINVALID for another type), so that a request is
// refused before its body is read.
func (s *CAStore) CheckFactor(ctx context.Context, orgID, factorID int64) error {
	return smartCardConfig(ctx, s.db, orgID, factorID)
}

// Get returns one CA config of the factor config. ENOTFOUND.
func (s *CAStore) Get(ctx context.Context, orgID, factorID, id int64) (*CAConfig, error) {
	if err := smartCardConfig(ctx, s.db, orgID, factorID); err != nil {
		return nil, err
	}
	return getCA(ctx, s.db, orgID, factorID, id)
}

// List returns the factor config's CAs, oldest first.
func (s *CAStore) List(ctx context.Context, orgID, factorID int64) ([]CAConfig, error) {
	if err := smartCardConfig(ctx, s.db, orgID, factorID); err != nil {
		return nil, err
	}
	out := []CAConfig{}
	err := s.db.NewSelect().Model(&out).Where("org_id = ? AND factor_config_id = ?", orgID, factorID).
		OrderExpr("added_time, id").Scan(ctx)
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("list CA configs: %w", err))
	}
	return out, nil
}

// Update changes is_enabled, the file or the mapping attribute, and records
// ca_config.updated with the fields that changed (a new file as its
// subject, thumbprint and expiry).
func (s *CAStore) Update(ctx context.Context, orgID, factorID, id int64, in CAInput) (*CAConfig, error) {
	now := time.Now().UTC()
	var cert *x509.Certificate
	if in.File != nil {
		var err error
		if cert, err = parseCAFile(in.File, now); err != nil {
			return nil, err
		}
	}
	if in.MappingAttribute != nil {
		if err := checkMapping(*in.MappingAttribute); err != nil {
			return nil, err
		}
	}
	var out *CAConfig
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := smartCardConfig(ctx, tx, orgID, factorID); err != nil {
			return err
		}
		c, err := getCA(ctx, tx, orgID, factorID, id)
		if err != nil {
			return err
		}
		before := c.audited()
		if in.IsEnabled != nil {
			c.IsEnabled = *in.IsEnabled
		}
		if in.MappingAttribute != nil {
			c.MappingAttribute = *in.MappingAttribute
		}
		if cert != nil {
			c.setCert(cert)
		}
		c.UpdatedAt = now
		_, err = tx.NewUpdate().Model(c).WherePK().Exec(ctx)
		if sqldb.IsUniqueViolation(err) {
			return errCADuplicate(c.Thumbprint)
		}
		if err != nil {
			return fmt.Errorf("update CA config: %w", err)
		}
		out = c
		return c.record(ctx, audit.CAConfigUpdated, audit.Changes(before, c.audited()))
	})
	return out, err
}

// Delete removes a CA config, and records ca_config.deleted. ENOTFOUND.
func (s *CAStore) Delete(ctx context.Context, orgID, factorID, id int64) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := smartCardConfig(ctx, tx, orgID, factorID); err != nil {
			return err
		}
		c := new(CAConfig)
		err := tx.NewDelete().Model(c).Where("org_id = ? AND factor_config_id = ? AND id = ?", orgID, factorID, id).
			Returning("id, org_id, factor_config_id, subject_name, thumbprint").Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrCAConfigNotFound
		}
		if err != nil {
			return fmt.Errorf("delete CA config: %w", err)
		}
		return c.record(ctx, audit.CAConfigDeleted, nil)
	})
}

// caAudited is what an event shows of a CA config: never its certificate,
// which its subject and thumbprint name.
type caAudited struct {
	IsEnabled        bool      `json:"is_enabled"`
	SubjectName      string    `json:"subject_name"`
	Thumbprint       string    `json:"thumbprint"`
	MappingAttribute string    `json:"certificate_mapping_attribute"`
	ExpiresOn        time.Time `json:"expires_on"`
}

func (c *CAConfig) audited() caAudited {
	return caAudited{IsEnabled: c.IsEnabled, SubjectName: c.SubjectName, Thumbprint: c.Thumbprint,
		MappingAttribute: c.MappingAttribute, ExpiresOn: c.ExpiresOn}
}

// record records the event typ of c, in its transaction: the CA config
// (named by its subject, with changes) and its factor config.
func (c *CAConfig) record(ctx context.Context, typ string, changes []models.FieldChange) error {
	target := audit.Target(CAConfigTargetType, c.ID, c.SubjectName+" ("+c.Thumbprint+")")
	target.Changes = changes
	return models.Record(ctx, models.AuditEvent{OrgID: c.OrgID, Type: typ,
		Targets: []models.EventTarget{target, audit.Target(FactorConfigTargetType, c.FactorConfigID, string(FactorSmartCard))}})
}

// Target types of the enrollment area's events.
const (
	CAConfigTargetType     = "ca_config"
	FactorConfigTargetType = "authn_factor_config"
	LogonScriptTargetType  = "logon_script_config"
)

// CATrust is the enabled CAs of one smart card factor config, ready to
// check certificates.
type CATrust struct {
	cas []trustedCA
}

type trustedCA struct {
	cert *x509.Certificate
	attr string
}

// Trust returns the enabled, parsed CAs of each of the factor configs
// factorIDs that has any; a config missing from the map accepts every
// certificate (no enabled CA).
func (s *CAStore) Trust(ctx context.Context, orgID int64, factorIDs []int64) (map[int64]*CATrust, error) {
	out := map[int64]*CATrust{}
	if len(factorIDs) == 0 {
		return out, nil
	}
	var rows []CAConfig
	err := s.db.NewSelect().Model(&rows).Where("org_id = ? AND factor_config_id IN (?) AND is_enabled", orgID, bun.List(factorIDs)).Scan(ctx)
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("select CA configs: %w", err))
	}
	for _, r := range rows {
		cert, err := x509.ParseCertificate(r.CertDER)
		if err != nil {
			return nil, fmt.Errorf("CA config %d: stored certificate unreadable: %w", r.ID, err)
		}
		t := out[r.FactorConfigID]
		if t == nil {
			t = &CATrust{}
			out[r.FactorConfigID] = t
		}
		t.cas = append(t.cas, trustedCA{cert: cert, attr: r.MappingAttribute})
	}
	return out, nil
}

var oidEmailAddress = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}

// certNames returns the values of a certificate that a mapping attribute
// compares with.
func certNames(cert *x509.Certificate, attr string) []string {
	var out []string
	switch attr {
	case MapEmail:
		out = append(out, cert.EmailAddresses...)
		for _, n := range cert.Subject.Names {
			if n.Type.Equal(oidEmailAddress) {
				if s, ok := n.Value.(string); ok {
					out = append(out, s)
				}
			}
		}
	case MapEmployeeID:
		if cert.Subject.SerialNumber != "" {
			out = append(out, cert.Subject.SerialNumber)
		}
		out = append(out, cert.Subject.CommonName)
	case MapDisplayName:
		out = append(out, cert.Subject.CommonName)
	}
	return out
}

func userAttr(u *identity.User, attr string) string {
	switch attr {
	case MapEmail:
		return u.Email
	case MapEmployeeID:
		return u.EmployeeID
	case MapDisplayName:
		return u.DisplayName
	}
	return ""
}

// Check says why cert may not enroll for user u at now, or nil: it must be
// signed by one of the enabled CAs (issuer and signature) that is valid at
// now (not before its NotBefore, not after its NotAfter) and name u by that
// CA's mapping attribute. A nil CATrust (no enabled CA) accepts every
// certificate; enabled CAs none of which is valid at now accept none.
func (t *CATrust) Check(cert *x509.Certificate, u *identity.User, now time.Time) error {
	if t == nil || len(t.cas) == 0 {
		return nil
	}
	var mismatch []string
	var invalid *x509.Certificate // a CA that signed cert but is not valid at now
	for _, ca := range t.cas {
		if !bytes.Equal(cert.RawIssuer, ca.cert.RawSubject) || cert.CheckSignatureFrom(ca.cert) != nil {
			continue
		}
		if now.Before(ca.cert.NotBefore) || now.After(ca.cert.NotAfter) {
			invalid = ca.cert
			continue
		}
		want := strings.TrimSpace(userAttr(u, ca.attr))
		for _, v := range certNames(cert, ca.attr) {
			if want != "" && strings.EqualFold(strings.TrimSpace(v), want) {
				return nil
			}
		}
		mismatch = append(mismatch, ca.attr)
	}
	if len(mismatch) == 0 && invalid != nil {
		return fmt.Errorf("the certificate authority %q that signed the certificate is valid only from %s to %s",
			invalid.Subject.String(), invalid.NotBefore.UTC().Format(time.RFC3339), invalid.NotAfter.UTC().Format(time.RFC3339))
	}
	if len(mismatch) == 0 {
		return fmt.Errorf("the certificate (issuer %q) is not signed by an enabled certificate authority of the smart card config", cert.Issuer.String())
	}
	return fmt.Errorf("the certificate does not name the user by %s (certificate mapping attribute of its certificate authority)", strings.Join(mismatch, ", "))
}
