package store

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/uptrace/bun"

	"iam/models/audit"
	"iam/models/devices"
	"iam/models/enrollment"
	"iam/models/hooks"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/management"
	"iam/models/notification"
	"iam/models/oauthstore"
	"iam/models/protection"
	"iam/models/scim"
	"iam/models/secret"
	"iam/models/sqldb"
)

// Store gives access to every area of the database. Each area's methods take
// the caller's organization id.
//
// The Store is the only door to the database: its areas' public methods own
// their transactions, and helpers that run inside one take a bun.IDB.
type Store struct {
	db    *bun.DB
	Orgs  *identity.OrgStore
	Jobs  *jobs.JobStore
	Blobs *jobs.DBBlobStore
	// Users are identity users; Groups their static and dynamic groups.
	Users  *identity.UserStore
	Groups *identity.GroupStore
	// Templates are notification templates; Notifications their schedules,
	// runs and deliveries.
	Templates     *notification.TemplateStore
	Notifications *notification.NotificationStore
	// OAuthClients are the applications registered with the authorization
	// server; OAuthTokens its codes and tokens.
	OAuthClients *oauthstore.ClientStore
	OAuthTokens  *oauthstore.OAuthTokenStore
	// Factors are the organization's factor configs, Enrollments the users'
	// enrollment data, LogonScript the logon script's configuration.
	Factors     *enrollment.FactorStore
	Enrollments *enrollment.EnrollmentStore
	LogonScript *enrollment.LogonScriptStore
	// Settings are the organization's settings.
	Settings *protection.SettingsStore
	// Devices are the devices with an agent, their local accounts, commands
	// and offline-enrolled users, and the agents' installation keys.
	Devices *devices.DeviceStore
	// DeviceGroups are named sets of devices that protection settings name.
	DeviceGroups *protection.DeviceGroupStore
	// CAs are the certificate authorities of smart card factor configs.
	CAs *enrollment.CAStore
	// Management holds management actions' view columns, uploads and
	// executions.
	Management *management.MgmtStore
	// ConditionConfigs are the business hours, geolocation and IP source
	// configs conditional access policies name; Policies the policies.
	ConditionConfigs *protection.ConditionConfigStore
	Policies         *protection.PolicyStore
	// Idempotency keeps the answers of requests sent with an
	// Idempotency-Key.
	Idempotency *jobs.IdempotencyStore
	// Audit reads the audit events every change writes; Digests seals
	// them into signed digests and verifies them.
	Audit   *audit.EventStore
	Digests *audit.DigestStore
	// Refusals records refused requests (a 403, a failed sign-in, a
	// refused registration) outside any change's transaction, at most
	// audit.DefaultRefusalRate a second per organization.
	Refusals *audit.RefusalLog
	// Hooks are the event hooks and their deliveries (docs/event-hooks.md).
	Hooks *hooks.HookStore
	// SCIM reads users and groups the SCIM way (/scim/v2; its writes go
	// through Users and Groups); ProvisioningTokens are the organizations'
	// SCIM bearer tokens.
	SCIM               *scim.Store
	ProvisioningTokens *scim.TokenStore

	// idLease is the process's id node lease, when LeaseIDs took one.
	idLease *sqldb.IDLease
}

// LeaseIDs leases this process's id node (LeaseIDNode) for the store's
// life: a process that makes ids calls it once at start, after migrating.
func (s *Store) LeaseIDs(ctx context.Context, log *slog.Logger) error {
	l, err := sqldb.LeaseIDNode(ctx, s.db, log)
	if err != nil {
		return err
	}
	s.idLease = l
	return nil
}

// Close writes the contact times of unchanged check-ins still pending
// (DeviceStore.FlushContacts), releases the id node lease, if any, then
// closes the database. Call
// it once nothing makes ids any more (the servers have stopped).
func (s *Store) Close() error {
	var errs []error
	flushCtx, cancelFlush := context.WithTimeout(context.Background(), 10*time.Second)
	errs = append(errs, s.Devices.CloseContacts(flushCtx))
	cancelFlush()
	if s.idLease != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, s.idLease.Release(ctx))
		cancel()
	}
	errs = append(errs, s.db.Close())
	return errors.Join(errs...)
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// NewStore wires the stores of every area over db.
func NewStore(db *bun.DB) *Store {
	blobs := jobs.NewDBBlobStore(db)
	jobStore := jobs.NewJobStore(db, blobs).OnEnd(management.EndJob)
	groups := identity.NewGroupStore(db)
	templates := notification.NewTemplateStore(db, blobs)
	return &Store{
		db:     db,
		Orgs:   identity.NewOrgStore(db),
		Jobs:   jobStore,
		Blobs:  blobs,
		Users:  identity.NewUserStore(db).BeforeDelete(devices.UnlinkDeletedUsers),
		Groups: groups,

		SCIM:               scim.NewStore(db),
		ProvisioningTokens: scim.NewTokenStore(db),

		Templates:     templates,
		Notifications: notification.NewNotificationStore(db, groups, templates),

		OAuthClients: oauthstore.NewClientStore(db),
		OAuthTokens:  oauthstore.NewOAuthTokenStore(db),

		Factors:      enrollment.NewFactorStore(db),
		Enrollments:  enrollment.NewEnrollmentStore(db),
		LogonScript:  enrollment.NewLogonScriptStore(db),
		Settings:     protection.NewSettingsStore(db),
		Devices:      devices.NewDeviceStore(db),
		DeviceGroups: protection.NewDeviceGroupStore(db),
		CAs:          enrollment.NewCAStore(db),
		Management:   management.NewMgmtStore(db, jobStore),

		ConditionConfigs: protection.NewConditionConfigStore(db),
		Policies:         protection.NewPolicyStore(db),
		Idempotency:      jobs.NewIdempotencyStore(db),

		Audit:    audit.NewEventStore(db),
		Digests:  audit.NewDigestStore(db),
		Refusals: audit.NewRefusalLog(db, audit.NewRefusals(audit.DefaultRefusalRate, audit.DefaultRefusalBurst)),
		Hooks:    hooks.NewHookStore(db),
	}
}

// SealBlobs makes the blob store seal what it writes with box and open what
// it reads with it, and the device store seal the agents' installation
// keys, and the hook store the event hooks' signing secrets. The commands that run the service call it with the key of
// IAM_ENCRYPTION_KEY before using the store.
func (s *Store) SealBlobs(box *secret.Box) *Store {
	s.Blobs.Seal(box)
	s.Devices.Seal(box)
	s.Hooks.Seal(box)
	return s
}
