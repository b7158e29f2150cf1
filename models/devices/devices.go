package devices

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/secret"
	"iam/models/sqldb"
)

// Agent types (spec 2.13). Only the device agent registers devices.
const (
	AgentDevice = "DeviceAgent"
	AgentNPS    = "NPSExtension"
	AgentIIS    = "IISModule"
)

// AgentTypes lists the agent types in the order agents-info shows them.
var AgentTypes = []string{AgentDevice, AgentNPS, AgentIIS}

// DevicePlatforms are the device agent's platforms (spec 2.13).
var DevicePlatforms = []string{"windows", "macos", "linux"}

// Agent statuses (spec 2.3), derived from the device row (Device.AgentStatus).
const (
	AgentPending  = "pending"
	AgentActive   = "active"
	AgentInactive = "inactive"
)

// JoinSvc is the join type of a device enrolled through the service: deleting
// it deletes the row (spec 3).
const JoinSvc = "SvcJoined"

// Device field rules.
const (
	MaxDeviceFieldLen = 255
	// MissedCheckins is how many intervals a device may miss before it is
	// inactive.
	MissedCheckins = 3
	// DefaultCheckinInterval is the interval a registration gets when the
	// caller names none.
	DefaultCheckinInterval = 60 * time.Second
)

var (
	deviceOSTypes   = []string{"Windows", "macOS", "Linux"}
	deviceJoinTypes = []string{"ADCloudHybridJoined", "ADJoined", "CloudJoined", JoinSvc, "IDPJoined"}
)

// DeviceFacts are the device fields an agent reports (spec 2.3).
type DeviceFacts struct {
	Name           string `bun:"name" json:"name"`
	OSType         string `bun:"os_type" json:"os_type"`
	OSDistribution string `bun:"os_distribution" json:"os_distribution"`
	OSMajorVersion string `bun:"os_major_version" json:"os_major_version"`
	OSReleaseName  string `bun:"os_release_name" json:"os_release_name"`
	OSBuildVersion string `bun:"os_build_version" json:"os_build_version"`
	SerialNumber   string `bun:"serial_number" json:"serial_number"`
	IPAddress      string `bun:"ip_address" json:"ip_address"`
	AgentVersion   string `bun:"agent_version" json:"agent_version"`
	JoinType       string `bun:"join_type" json:"join_type"`
	Domain         string `bun:"domain" json:"domain"`
	Tenant         string `bun:"tenant" json:"tenant"`
	DNSHostname    string `bun:"dns_hostname" json:"dns_hostname"`
	Container      string `bun:"container" json:"container"`
	ManagedBy      string `bun:"managed_by" json:"managed_by"`
	Owner          string `bun:"owner" json:"owner"`
	MDM            string `bun:"mdm" json:"mdm"`
	Description    string `bun:"description" json:"description"`
}

// Validate checks the facts: name, os_type and join_type are required, the
// enumerations hold their values, ip_address is an address, no field is
// longer than MaxDeviceFieldLen.
func (f *DeviceFacts) Validate() error {
	for _, c := range []struct{ name, v string }{
		{"name", f.Name}, {"os_type", f.OSType}, {"os_distribution", f.OSDistribution},
		{"os_major_version", f.OSMajorVersion}, {"os_release_name", f.OSReleaseName},
		{"os_build_version", f.OSBuildVersion}, {"serial_number", f.SerialNumber},
		{"ip_address", f.IPAddress}, {"agent_version", f.AgentVersion}, {"join_type", f.JoinType},
		{"domain", f.Domain}, {"tenant", f.Tenant}, {"dns_hostname", f.DNSHostname},
		{"container", f.Container}, {"managed_by", f.ManagedBy}, {"owner", f.Owner},
		{"mdm", f.MDM}, {"description", f.Description},
	} {
		if len(c.v) > MaxDeviceFieldLen || !utf8.ValidString(c.v) {
			return models.Invalid("facts."+c.name, "must be valid text of at most %d bytes", MaxDeviceFieldLen)
		}
	}
	if f.Name == "" {
		return models.Invalid("facts.name", "is required")
	}
	if !models.OneOf(f.OSType, deviceOSTypes) {
		return models.Invalid("facts.os_type", "must be one of %v", deviceOSTypes)
	}
	if !models.OneOf(f.JoinType, deviceJoinTypes) {
		return models.Invalid("facts.join_type", "must be one of %v", deviceJoinTypes)
	}
	if f.IPAddress != "" {
		if _, err := netip.ParseAddr(f.IPAddress); err != nil {
			return models.Invalid("facts.ip_address", "must be an IPv4 or IPv6 address")
		}
	}
	return nil
}

// Device is a device with an agent (spec 2.3). Its credential is a random
// secret of which only the SHA-256 digest is kept.
type Device struct {
	bun.BaseModel `bun:"table:devices"`

	ID       int64  `bun:"id,pk"`
	OrgID    int64  `bun:"org_id"`
	Platform string `bun:"platform"`
	DeviceFacts
	IsDeactivated bool `bun:"is_deactivated"`
	// SecretHash is the digest of the agent's secret; nil once the agent
	// acknowledged its uninstall: the credential is refused from then on.
	SecretHash             []byte `bun:"secret_hash"`
	CheckinIntervalSeconds int64  `bun:"checkin_interval_seconds"`
	// ReportedDigest is the digest of the last check-in's facts, accounts
	// and offline users: a check-in reporting the same writes nothing else.
	ReportedDigest      string     `bun:"reported_digest"`
	TotalLocalAccounts  int64      `bun:"total_local_accounts"`
	LinkedLocalAccounts int64      `bun:"linked_local_accounts"`
	AgentInstalledTime  time.Time  `bun:"agent_installed_time"`
	DateAdded           time.Time  `bun:"date_added"`
	LastContactTime     *time.Time `bun:"last_contact_time"`
	// InactiveAfter is LastContactTime plus MissedCheckins intervals, kept
	// so that lists filter and sort on the agent status in SQL.
	InactiveAfter *time.Time `bun:"inactive_after"`
	// UninstallRequestedAt is when an admin deleted the device: its agent
	// gets an uninstall command. DeletedAt is set too for a SvcJoined device,
	// which leaves every list at once and whose row goes with the ack.
	UninstallRequestedAt *time.Time `bun:"uninstall_requested_at"`
	DeletedAt            *time.Time `bun:"deleted_at"`
	// PossibleDuplicateOf is the live device of the same machine this
	// device was registered beside, without proof of that device's
	// credential (Register); cleared when an admin deletes either.
	PossibleDuplicateOf *int64 `bun:"possible_duplicate_of"`

	// pending are the device's pending commands, read with it by
	// AuthenticateCheckIn (pendingRead) for the check-in that follows.
	pending     []Command
	pendingRead bool
	UpdatedAt   time.Time `bun:"updated_at"`

	// Derived by lists (DeviceStore.List), not stored.
	ListedAgentStatus string `bun:"agent_status,scanonly"`
	IsAgentOutdated   bool   `bun:"is_agent_outdated,scanonly"`
}

// inactiveAfter is when a device that checked in at t becomes inactive.
func (d *Device) inactiveAfter(t time.Time) *time.Time {
	at := t.Add(time.Duration(MissedCheckins*d.CheckinIntervalSeconds) * time.Second)
	return &at
}

// AgentStatus is pending until the first check-in, active while the agent
// checks in, inactive after MissedCheckins missed intervals or once an
// uninstall was requested.
func (d *Device) AgentStatus(now time.Time) string {
	switch {
	case d.UninstallRequestedAt != nil:
		return AgentInactive
	case d.LastContactTime == nil:
		return AgentPending
	case now.Sub(*d.LastContactTime) > time.Duration(MissedCheckins*d.CheckinIntervalSeconds)*time.Second:
		return AgentInactive
	}
	return AgentActive
}

// DeviceStore keeps devices, their agents' credentials and installation
// keys, local accounts, commands, offline-enrolled users and link history.
type DeviceStore struct {
	db       *bun.DB
	d        devicesDialect
	box      *secret.Box
	contacts contacts
	reads    checkinReads
}

// NewDeviceStore returns the DeviceStore over db; installation keys need
// Seal first.
func NewDeviceStore(db *bun.DB) *DeviceStore {
	d := devicesDialectOf(db)
	return &DeviceStore{db: db, d: d, reads: newCheckinReads(db, d)}
}

// Seal makes the store seal the agents' installation keys with box.
func (s *DeviceStore) Seal(box *secret.Box) { s.box = box }

// errNoBox is returned when installation keys are asked of a store without
// the encryption key.
var errNoBox = errors.New("installation keys need the encryption key (IAM_ENCRYPTION_KEY)")

// ErrBadDeviceCredentials answers a wrong, unknown or revoked device credential.
var ErrBadDeviceCredentials = &models.Error{Code: models.EUNAUTHORIZED, Title: "Unauthorized", Detail: "the device credential is invalid"}

// ErrBadInstallationKey answers a wrong or superseded installation key.
var ErrBadInstallationKey = &models.Error{Code: models.EUNAUTHORIZED, Title: "Unauthorized", Detail: "the installation key is invalid or superseded"}

// DeviceNotFound is the error of a device that is not in the organization.
func DeviceNotFound(id int64) *models.Error {
	return models.NotFound("Device", "no device with the id "+models.FormatID(id))
}

// installKey is an organization's installation key of one agent type,
// sealed; key_digest finds it from the key a registration presents.
type installKey struct {
	bun.BaseModel `bun:"table:agent_install_keys"`

	OrgID     int64     `bun:"org_id,pk"`
	AgentType string    `bun:"agent_type,pk"`
	KeyDigest string    `bun:"key_digest"`
	KeySealed []byte    `bun:"key_sealed"`
	CreatedAt time.Time `bun:"created_at"`
}

func installKeyAAD(orgID int64, agentType string) string {
	return "agent-install-key:" + strconv.FormatInt(orgID, 10) + ":" + agentType
}

func digestHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// randomToken is 256 random bits, base64url without padding.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *DeviceStore) newInstallKey(orgID int64, agentType string) (*installKey, string, error) {
	if s.box == nil {
		return nil, "", errNoBox
	}
	key := randomToken()
	return &installKey{
		OrgID: orgID, AgentType: agentType, KeyDigest: digestHex(key),
		KeySealed: s.box.Seal([]byte(key), installKeyAAD(orgID, agentType)),
		CreatedAt: time.Now().UTC(),
	}, key, nil
}

func checkAgentType(agentType string) error {
	if !models.OneOf(agentType, AgentTypes) {
		return models.Invalid("agent_type", "must be one of %v", AgentTypes)
	}
	return nil
}

// InstallKey returns the organization's installation key of agentType,
// making one on first use. EINVALID for an unknown agent type.
func (s *DeviceStore) InstallKey(ctx context.Context, orgID int64, agentType string) (string, error) {
	if err := checkAgentType(agentType); err != nil {
		return "", err
	}
	if s.box == nil {
		return "", errNoBox
	}
	var k installKey
	err := s.db.NewSelect().Model(&k).Where("org_id = ? AND agent_type = ?", orgID, agentType).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		nk, _, kerr := s.newInstallKey(orgID, agentType)
		if kerr != nil {
			return "", kerr
		}
		if _, err = s.db.NewInsert().Model(nk).On("CONFLICT (org_id, agent_type) DO NOTHING").Exec(ctx); err != nil {
			return "", models.Unavailable(fmt.Errorf("insert installation key: %w", err))
		}
		err = s.db.NewSelect().Model(&k).Where("org_id = ? AND agent_type = ?", orgID, agentType).Scan(ctx)
	}
	if err != nil {
		return "", models.Unavailable(fmt.Errorf("read installation key: %w", err))
	}
	plain, err := s.box.Open(k.KeySealed, installKeyAAD(orgID, agentType))
	if err != nil {
		return "", fmt.Errorf("open installation key: %w", err)
	}
	return string(plain), nil
}

// RegenerateInstallKey replaces the organization's installation key of
// agentType with a new one and returns it: the old key admits no new
// registration from then on; registered devices keep their credentials.
// Records agent.install_key_regenerated, which says only that the key
// changed.
func (s *DeviceStore) RegenerateInstallKey(ctx context.Context, orgID int64, agentType string) (string, error) {
	if err := checkAgentType(agentType); err != nil {
		return "", err
	}
	k, key, err := s.newInstallKey(orgID, agentType)
	if err != nil {
		return "", err
	}
	if err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(k).
			On("CONFLICT (org_id, agent_type) DO UPDATE").
			Set("key_digest = EXCLUDED.key_digest").
			Set("key_sealed = EXCLUDED.key_sealed").
			Set("created_at = EXCLUDED.created_at").
			Exec(ctx); err != nil {
			return fmt.Errorf("replace installation key: %w", err)
		}
		// The key never appears in the event: only that it changed.
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.AgentInstallKeyRegenerate,
			Targets: []models.EventTarget{{Type: InstallKeyTargetType, ID: agentType, DisplayName: agentType + " installation key",
				Changes: []models.FieldChange{{Field: "installation_key", Secret: true}}}}})
	}); err != nil {
		return "", err
	}
	return key, nil
}

// keyOrg returns the organization whose current key of agentType is key,
// or ErrBadInstallationKey.
func (s *DeviceStore) keyOrg(ctx context.Context, key, agentType string) (int64, error) {
	if s.box == nil {
		return 0, errNoBox
	}
	if len(key) > 256 {
		return 0, ErrBadInstallationKey
	}
	var k installKey
	err := s.db.NewSelect().Model(&k).Where("key_digest = ?", digestHex(key)).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrBadInstallationKey
	}
	if err != nil {
		return 0, models.Unavailable(fmt.Errorf("read installation key: %w", err))
	}
	plain, err := s.box.Open(k.KeySealed, installKeyAAD(k.OrgID, k.AgentType))
	if err != nil || subtle.ConstantTimeCompare(plain, []byte(key)) != 1 || k.AgentType != agentType {
		return 0, ErrBadInstallationKey
	}
	return k.OrgID, nil
}

// Registration is what an agent presents to register its device.
type Registration struct {
	InstallationKey string
	AgentType       string
	Platform        string
	Facts           DeviceFacts
	// Interval is the check-in interval the device is given;
	// DefaultCheckinInterval when zero.
	Interval time.Duration
	// DeviceID and DeviceSecret are the device credential the agent
	// presents when it registers again (its own re-registration): that
	// device is taken over. Zero when the agent presents none.
	DeviceID     int64
	DeviceSecret string
	// MaxDevices caps the organization's devices (or, for an NPS extension
	// or IIS module, its installations): a registration that would add one
	// more answers DeviceLimitReached. No cap when zero.
	MaxDevices int
}

// DeviceLimitReached is the error of a registration past the
// organization's cap of devices (IAM_MAX_DEVICES_PER_ORG).
func DeviceLimitReached(max int) *models.Error {
	return &models.Error{Code: models.ECONFLICT, Title: "Device Limit Reached", Detail: fmt.Sprintf(
		"the organization has %d devices, the most this service admits (IAM_MAX_DEVICES_PER_ORG); delete devices to register others", max)}
}

// RegistrationRefusal is the error of a registration refused after its
// installation key named the organization: past the device cap (ECONFLICT,
// DeviceLimitReached), or presenting a device credential that is wrong or
// a deleted device's (EUNAUTHORIZED). Err is the answer (models.ErrorCode,
// errors.Is and errors.As find it through); OrgID the organization, whose
// audit log records the refusal (access.denied). A wrong installation key
// names no organization and is never one.
type RegistrationRefusal struct {
	OrgID int64
	Err   error
}

func (e *RegistrationRefusal) Error() string { return e.Err.Error() }

// Unwrap returns the answer.
func (e *RegistrationRefusal) Unwrap() error { return e.Err }

// refusedIn returns err, when it refuses a registration to orgID
// (ECONFLICT or EUNAUTHORIZED), as a *RegistrationRefusal; any other error
// as it is.
func refusedIn(orgID int64, err error) error {
	switch models.ErrorCode(err) {
	case models.ECONFLICT, models.EUNAUTHORIZED:
		return &RegistrationRefusal{OrgID: orgID, Err: err}
	}
	return err
}

// ErrDeletedDeviceCredential answers the credential of a device an admin
// deleted, on any agent route but the check-in that fetches and
// acknowledges its uninstall.
var ErrDeletedDeviceCredential = &models.Error{Code: models.EUNAUTHORIZED, Title: "Unauthorized",
	Detail: "the device was deleted: its credential serves only to fetch and acknowledge the uninstall"}

// Register admits a device whose agent presents its organization's current
// installation key, and returns the device and its secret (shown once;
// only its digest is kept). Registration never silently revokes a working
// device. A device is taken over (new secret, new facts, pending until its
// first check-in; its local accounts, links and pending commands stay)
// only when
//
//   - the registration presents that device's credential (DeviceID and
//     DeviceSecret: the agent registering again), or
//   - it names the same machine (same serial number; same DNS host name,
//     without regard to case, when it has none) as a device that has been
//     inactive for MissedCheckins intervals (counted from its registration
//     when it never checked in).
//
// The same machine as a live device makes a new device flagged as a
// possible duplicate of it (PossibleDuplicateOf), for an admin to resolve
// by deleting one of them. A device an admin deleted is never taken over:
// the same machine is then a new device. EUNAUTHORIZED for a wrong or
// superseded key, or a presented credential that is wrong, of another
// organization or of a deleted device; ECONFLICT (DeviceLimitReached)
// past MaxDevices; EINVALID for bad facts, agent type or platform. A
// refusal once the key named the organization is a *RegistrationRefusal.
//
// Records device.registered: a takeover's event says so in its reason,
// with the facts that changed and that the secret did.
func (s *DeviceStore) Register(ctx context.Context, r Registration) (*Device, string, error) {
	if r.AgentType != AgentDevice {
		return nil, "", models.Invalid("agent_type", "only the %s registers devices", AgentDevice)
	}
	if !models.OneOf(r.Platform, DevicePlatforms) {
		return nil, "", models.Invalid("platform", "must be one of %v", DevicePlatforms)
	}
	if err := r.Facts.Validate(); err != nil {
		return nil, "", err
	}
	orgID, err := s.keyOrg(ctx, r.InstallationKey, r.AgentType)
	if err != nil {
		return nil, "", err
	}
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultCheckinInterval
	}
	devSecret := randomToken()
	hash := sha256.Sum256([]byte(devSecret))
	now := time.Now().UTC()
	var dev *Device
	if err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		old, dup, err := s.registeredBefore(ctx, tx, orgID, r, now)
		if err != nil {
			return err
		}
		d := &Device{
			ID: sqldb.NewID(), OrgID: orgID, Platform: r.Platform, DeviceFacts: r.Facts,
			SecretHash: hash[:], CheckinIntervalSeconds: int64(interval / time.Second),
			AgentInstalledTime: now, DateAdded: now, UpdatedAt: now,
		}
		if old == nil {
			live := tx.NewSelect().Table("devices").Where("org_id = ? AND deleted_at IS NULL", orgID)
			if err := s.checkDeviceCap(ctx, tx, orgID, r.MaxDevices, live); err != nil {
				return err
			}
			if dup != nil {
				d.PossibleDuplicateOf = &dup.ID
			}
			if _, err := tx.NewInsert().Model(d).Exec(ctx); err != nil {
				return fmt.Errorf("insert device: %w", err)
			}
			dev = d
			ev := models.AuditEvent{OrgID: orgID, Type: audit.DeviceRegistered, Targets: []models.EventTarget{deviceTarget(d)}}
			if dup != nil {
				ev.Targets = append(ev.Targets, deviceTarget(dup))
				ev.Reason = "a new device, possibly a duplicate of the device " + models.FormatID(dup.ID) +
					" (the same machine, still checking in)"
			}
			return models.Record(ctx, ev)
		}
		d.ID, d.DateAdded, d.PossibleDuplicateOf = old.ID, old.DateAdded, old.PossibleDuplicateOf
		d.TotalLocalAccounts, d.LinkedLocalAccounts = old.TotalLocalAccounts, old.LinkedLocalAccounts
		if _, err := tx.NewUpdate().Model(d).WherePK().
			ExcludeColumn("id", "org_id", "date_added", "total_local_accounts", "linked_local_accounts").
			Exec(ctx); err != nil {
			return fmt.Errorf("take over device: %w", err)
		}
		dev = d
		target := deviceTarget(d)
		target.Changes = append(audit.Changes(old.DeviceFacts, d.DeviceFacts),
			models.FieldChange{Field: "device_secret", Secret: true})
		reason := "took over the device: its agent registered again with the device's credential"
		if r.DeviceID == 0 {
			reason = "took over the device: the same machine registered after the device missed " +
				strconv.Itoa(MissedCheckins) + " check-ins"
		}
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.DeviceRegistered,
			Targets: []models.EventTarget{target}, Reason: reason})
	}); err != nil {
		return nil, "", refusedIn(orgID, err)
	}
	return dev, devSecret, nil
}

// registeredBefore finds, locked, the device a registration of orgID takes
// over (old), or else the live device it may duplicate (dup); both nil for
// a machine the organization does not know.
func (s *DeviceStore) registeredBefore(ctx context.Context, tx bun.Tx, orgID int64, r Registration, now time.Time) (old, dup *Device, err error) {
	if r.DeviceID != 0 {
		// The agent's own re-registration: it proves its credential.
		var d Device
		q := tx.NewSelect().Model(&d).Where("id = ? AND org_id = ?", r.DeviceID, orgID)
		err = s.d.LockRows(q, "UPDATE").Scan(ctx)
		if models.IsNoRows(err) {
			return nil, nil, ErrBadDeviceCredentials
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read device: %w", err)
		}
		sum := sha256.Sum256([]byte(r.DeviceSecret))
		if d.SecretHash == nil || subtle.ConstantTimeCompare(d.SecretHash, sum[:]) != 1 {
			return nil, nil, ErrBadDeviceCredentials
		}
		if d.UninstallRequestedAt != nil {
			return nil, nil, ErrDeletedDeviceCredential
		}
		return &d, nil, nil
	}
	same, err := s.sameMachine(ctx, tx, orgID, &r.Facts)
	if err != nil || same == nil {
		return nil, nil, err
	}
	if same.abandoned(now) {
		return same, nil, nil
	}
	return nil, same, nil
}

// abandoned reports whether a device has been inactive for MissedCheckins
// intervals at now: since its last check-in, or since its registration
// when it never checked in.
func (d *Device) abandoned(now time.Time) bool {
	last := d.AgentInstalledTime
	if d.LastContactTime != nil && d.LastContactTime.After(last) {
		last = *d.LastContactTime
	}
	return now.Sub(last) > time.Duration(MissedCheckins*d.CheckinIntervalSeconds)*time.Second
}

// checkDeviceCap refuses one more of the organization's rows that count
// (counts: its devices, or its installations) when it holds max already.
// It locks the organization's row first, so that concurrent registrations
// cannot pass the cap together.
func (s *DeviceStore) checkDeviceCap(ctx context.Context, tx bun.Tx, orgID int64, max int, counts *bun.SelectQuery) error {
	if max <= 0 {
		return nil
	}
	var id int64
	if err := s.d.LockRows(tx.NewSelect().Table("organizations").Column("id").Where("id = ?", orgID), "UPDATE").
		Scan(ctx, &id); err != nil {
		return fmt.Errorf("lock organization: %w", err)
	}
	n, err := counts.Count(ctx)
	if err != nil {
		return fmt.Errorf("count devices: %w", err)
	}
	if n >= int64(max) {
		return DeviceLimitReached(max)
	}
	return nil
}

// sameMachine finds, locked, the organization's oldest device with the
// serial number of f, or with its DNS host name when it has no serial
// number, among those an admin has not deleted.
func (s *DeviceStore) sameMachine(ctx context.Context, tx bun.Tx, orgID int64, f *DeviceFacts) (*Device, error) {
	q := tx.NewSelect().Model((*Device)(nil)).Where("org_id = ? AND uninstall_requested_at IS NULL", orgID).
		OrderExpr("id").Limit(1)
	switch {
	case f.SerialNumber != "":
		q = q.Where("serial_number = ?", f.SerialNumber)
	case f.DNSHostname != "":
		q = q.Where("dns_hostname <> '' AND lower(dns_hostname) = lower(?)", f.DNSHostname)
	default:
		return nil, nil
	}
	var d Device
	err := s.d.LockRows(q, "UPDATE").Scan(ctx, &d)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find device: %w", err)
	}
	return &d, nil
}

// ParseDeviceCredential splits "<device_id>:<device_secret>".
func ParseDeviceCredential(cred string) (int64, string, error) {
	for i := 0; i < len(cred); i++ {
		if cred[i] == ':' {
			id, err := strconv.ParseInt(cred[:i], 10, 64)
			if err != nil || id <= 0 || len(cred)-i-1 > 256 {
				return 0, "", ErrBadDeviceCredentials
			}
			return id, cred[i+1:], nil
		}
	}
	return 0, "", ErrBadDeviceCredentials
}

// Authenticate returns the device whose credential is id and devSecret
// (the secret Register returned, after its "<id>:" prefix). EUNAUTHORIZED
// when the device is unknown, the secret wrong, the agent uninstalled, or
// the device deleted by an admin (ErrDeletedDeviceCredential: its
// credential then serves only the check-in, AuthenticateCheckIn, that
// fetches and acknowledges the uninstall).
func (s *DeviceStore) Authenticate(ctx context.Context, id int64, devSecret string) (*Device, error) {
	var d Device
	err := s.db.NewSelect().Model(&d).Where("id = ?", id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrBadDeviceCredentials
	}
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("read device: %w", err))
	}
	sum := sha256.Sum256([]byte(devSecret))
	if d.SecretHash == nil || subtle.ConstantTimeCompare(d.SecretHash, sum[:]) != 1 {
		return nil, ErrBadDeviceCredentials
	}
	if d.UninstallRequestedAt != nil {
		return nil, ErrDeletedDeviceCredential
	}
	return &d, nil
}

// Get returns a device of the organization. ENOTFOUND (Device Not Found)
// for an unknown, deleted or another organization's device.
func (s *DeviceStore) Get(ctx context.Context, orgID, id int64) (*Device, error) {
	var d Device
	err := s.db.NewSelect().Model(&d).Where("id = ? AND org_id = ? AND deleted_at IS NULL", id, orgID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, DeviceNotFound(id)
	}
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("read device: %w", err))
	}
	return &d, nil
}

// lockDevice reads, locked for the transaction, a device of the
// organization that is not deleted. ENOTFOUND otherwise.
func (s *DeviceStore) lockDevice(ctx context.Context, tx bun.Tx, orgID, id int64) (*Device, error) {
	var d Device
	q := tx.NewSelect().Model(&d).Where("id = ? AND org_id = ? AND deleted_at IS NULL", id, orgID)
	err := s.d.LockRows(q, "UPDATE").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, DeviceNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("read device: %w", err)
	}
	return &d, nil
}

// Delete deletes a device as spec 3 says: a SvcJoined device leaves at once
// (its row goes when its agent acknowledges the uninstall); any other stays,
// inactive. Either way its agent gets an uninstall command and its other
// pending commands are withdrawn, and the possible-duplicate flags between
// it and other devices are cleared (deleting one of two duplicates
// resolves them). Returns the device as it is after. Records
// device.deleted, the first time only (a device deleted again is left as
// it is). ENOTFOUND (Device Not Found) for an unknown or another organization's
// device.
func (s *DeviceStore) Delete(ctx context.Context, orgID, id int64) (*Device, error) {
	var dev *Device
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		d, err := s.lockDevice(ctx, tx, orgID, id)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		first := d.UninstallRequestedAt == nil
		if first {
			d.UninstallRequestedAt = &now
			if _, err := tx.NewUpdate().Table("device_commands").Set("status = ?", CommandWithdrawn).
				Where("device_id = ? AND status = ?", d.ID, CommandPending).Exec(ctx); err != nil {
				return fmt.Errorf("withdraw commands: %w", err)
			}
			if _, err := queueCommand(ctx, tx, d, nil, CmdUninstall, struct{}{}); err != nil {
				return err
			}
		}
		if d.JoinType == JoinSvc {
			d.DeletedAt = &now
		}
		d.UpdatedAt = now
		d.PossibleDuplicateOf = nil
		if _, err := tx.NewUpdate().Model(d).WherePK().
			Column("uninstall_requested_at", "deleted_at", "updated_at", "possible_duplicate_of").Exec(ctx); err != nil {
			return fmt.Errorf("delete device: %w", err)
		}
		if _, err := tx.NewUpdate().Table("devices").Set("possible_duplicate_of = NULL").
			Where("possible_duplicate_of = ? AND org_id = ?", d.ID, orgID).Exec(ctx); err != nil {
			return fmt.Errorf("clear duplicate flags: %w", err)
		}
		dev = d
		if !first {
			return nil // deleted before: nothing changed
		}
		ev := models.AuditEvent{OrgID: orgID, Type: audit.DeviceDeleted, Targets: []models.EventTarget{deviceTarget(d)},
			Reason: "the device stays, inactive, and its agent is sent an uninstall command"}
		if d.DeletedAt != nil {
			ev.Reason = "the device leaves the lists; its agent is sent an uninstall command, whose acknowledgement removes it"
		}
		return models.Record(ctx, ev)
	})
	return dev, err
}

// PlatformCount is how many of an organization's devices run a platform's
// agent: Installed those whose agent is not uninstalled, Total all.
type PlatformCount struct{ Installed, Total int64 }

// PlatformCounts counts the organization's devices per platform.
func (s *DeviceStore) PlatformCounts(ctx context.Context, orgID int64) (map[string]PlatformCount, error) {
	var rows []struct {
		Platform  string `bun:"platform"`
		Installed int64  `bun:"installed"`
		Total     int64  `bun:"total"`
	}
	err := s.db.NewSelect().Table("devices").Column("platform").
		ColumnExpr("count(*) AS total").
		ColumnExpr("sum(CASE WHEN uninstall_requested_at IS NULL THEN 1 ELSE 0 END) AS installed").
		Where("org_id = ? AND deleted_at IS NULL", orgID).Group("platform").Scan(ctx, &rows)
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("count devices: %w", err))
	}
	out := make(map[string]PlatformCount, len(rows))
	for _, r := range rows {
		out[r.Platform] = PlatformCount{Installed: r.Installed, Total: r.Total}
	}
	return out, nil
}
