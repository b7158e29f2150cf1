package hooks

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/listing"
	"iam/models/secret"
	"iam/models/sqldb"
)

// Hook is an event hook: where an organization's audit events of the types
// it names are delivered.
type Hook struct {
	bun.BaseModel `bun:"table:event_hooks,alias:event_hook"`

	ID          int64    `bun:"id,pk"`
	OrgID       int64    `bun:"org_id"`
	URL         string   `bun:"url"`
	Description string   `bun:"description"`
	EventTypes  []string `bun:"event_types,type:json"`
	Enabled     bool     `bun:"enabled"`
	// SecretSealed is the signing secret's 32 bytes sealed with the box;
	// OldSecretSealed the previous one, still signing until
	// OldSecretExpiresAt (a rotation's 24 hours).
	SecretSealed       []byte     `bun:"secret_sealed"`
	OldSecretSealed    []byte     `bun:"old_secret_sealed"`
	OldSecretExpiresAt *time.Time `bun:"old_secret_expires_at"`
	// CursorSeq is the last of the organization's audit events the
	// dispatcher has read for this hook.
	CursorSeq int64 `bun:"cursor_seq"`
	// FailingSince is when deliveries began to fail without a success
	// since; nil while the last one succeeded.
	FailingSince   *time.Time `bun:"failing_since"`
	DisabledReason string     `bun:"disabled_reason"`
	CreatedAt      time.Time  `bun:"created_at"`
	UpdatedAt      time.Time  `bun:"updated_at"`
}

// Limits of hooks.
const (
	MaxURLLen         = 2048
	MaxDescriptionLen = 1024
	MaxEventTypes     = 100
	// MaxHooksPerOrg caps an organization's hooks.
	MaxHooksPerOrg = 100
	// SecretPrefix begins every signing secret as the API shows it.
	SecretPrefix = "whsec_"
	// SecretBytes is the length of a signing secret.
	SecretBytes = 32
	// RotationOverlap is how long the previous secret keeps signing after
	// a rotation.
	RotationOverlap = 24 * time.Hour
	// TestEventType is the type of the event POST …/test sends.
	TestEventType = "hook.test"
	// TargetType is the target type of the hooks' audit events.
	TargetType = "event_hook"
)

// ErrHookNotFound answers a hook not in the organization.
var ErrHookNotFound = models.NotFound("Event Hook", "the event hook does not exist")

// errNoBox is returned when secrets are asked of a store without the
// encryption key.
var errNoBox = errors.New("event hook secrets need the encryption key (IAM_ENCRYPTION_KEY)")

// HookListing is the allow-list of GET /event-hooks: offset paging, newest
// last.
var HookListing = listing.MustSchema(listing.Schema{
	Name:   "event_hooks",
	Paging: listing.OffsetPaging,
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
		{Name: "url", Column: "url", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "description", Column: "description", Type: listing.TypeString, Filter: true},
		{Name: "enabled", Column: "enabled", Type: listing.TypeBoolean, Filter: true, Sort: true},
		{Name: "created_time", Column: "created_at", Type: listing.TypeTime, Filter: true, Sort: true},
		{Name: "last_modified_time", Column: "updated_at", Type: listing.TypeTime, Filter: true, Sort: true},
	},
	DefaultSort: "created_time",
})

// URLPolicy says which hook URLs are accepted when saved: https always,
// http only when AllowHTTP (iam dev, IAM_EVENT_HOOKS_ALLOW_HTTP). Where the
// URL resolves is checked at each delivery, not here.
type URLPolicy struct {
	AllowHTTP bool
}

// HookStore keeps event hooks and their deliveries.
type HookStore struct {
	db     bun.IDB
	box    *secret.Box
	policy URLPolicy
}

// NewHookStore returns the HookStore over db.
func NewHookStore(db bun.IDB) *HookStore { return &HookStore{db: db} }

// Seal makes the store seal the signing secrets with box.
func (s *HookStore) Seal(box *secret.Box) { s.box = box }

// SetURLPolicy sets which URLs Create and Update accept.
func (s *HookStore) SetURLPolicy(p URLPolicy) { s.policy = p }

func secretAAD(hookID int64) string { return "event_hook:" + models.FormatID(hookID) }

// newSecret returns a fresh secret's bytes and its text (whsec_…).
func newSecret() ([]byte, string) {
	b := make([]byte, SecretBytes)
	_, _ = rand.Read(b)
	return b, SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// CheckURL checks a hook URL against p: absolute, http(s), a host, no user
// information or fragment.
func CheckURL(raw string, p URLPolicy) error {
	if raw == "" {
		return models.Invalid("url", "is required")
	}
	if len(raw) > MaxURLLen {
		return models.Invalid("url", "must be at most %d characters", MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return models.Invalid("url", "must be an absolute URL")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !p.AllowHTTP {
			return models.Invalid("url", "must be https")
		}
	default:
		return models.Invalid("url", "must be https")
	}
	if u.User != nil {
		return models.Invalid("url", "must not hold user information")
	}
	if u.Fragment != "" {
		return models.Invalid("url", "must not have a fragment")
	}
	return nil
}

// Patterns returns every event type pattern a hook may name, sorted: "*",
// each type of the catalogue (audit.Types, plus hook.test) and each family
// wildcard ("user.*": every type beginning "user."; "device.account.*").
func Patterns() []string {
	set := map[string]bool{"*": true}
	for _, t := range append(audit.Types(), TestEventType) {
		set[t] = true
		for i := range len(t) {
			if t[i] == '.' {
				set[t[:i+1]+"*"] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// CheckEventTypes checks and normalizes event type patterns: each one of
// Patterns.
func CheckEventTypes(types []string) ([]string, error) {
	if len(types) == 0 {
		return nil, models.Invalid("event_types", "name at least one event type")
	}
	if len(types) > MaxEventTypes {
		return nil, models.Invalid("event_types", "at most %d event types", MaxEventTypes)
	}
	known := Patterns()
	out := make([]string, 0, len(types))
	for _, t := range types {
		if _, ok := slices.BinarySearch(known, t); !ok {
			return nil, models.Invalid("event_types", "%q is not an event type of the catalogue nor a family wildcard (user.*)", t)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Matches reports whether a hook naming patterns receives events of type typ.
// hook.test reaches every hook (it is sent to one hook on request).
func Matches(patterns []string, typ string) bool {
	if typ == TestEventType {
		return true
	}
	for _, p := range patterns {
		if p == "*" || p == typ || (strings.HasSuffix(p, ".*") && strings.HasPrefix(typ, strings.TrimSuffix(p, "*"))) {
			return true
		}
	}
	return false
}

func (s *HookStore) check(h *Hook) error {
	h.URL = strings.TrimSpace(h.URL)
	if err := CheckURL(h.URL, s.policy); err != nil {
		return err
	}
	if !utf8.ValidString(h.Description) || utf8.RuneCountInString(h.Description) > MaxDescriptionLen {
		return models.Invalid("description", "must be text of at most %d characters", MaxDescriptionLen)
	}
	types, err := CheckEventTypes(h.EventTypes)
	if err != nil {
		return err
	}
	h.EventTypes = types
	return nil
}

// Create checks and stores a new hook with a fresh signing secret, which it
// returns (whsec_…): the only time it is shown. The hook receives the
// events committed after it. EINVALID, ECONFLICT (too many hooks).
func (s *HookStore) Create(ctx context.Context, h *Hook) (string, error) {
	if err := s.check(h); err != nil {
		return "", err
	}
	if s.box == nil {
		return "", errNoBox
	}
	now := time.Now().UTC()
	h.ID, h.CreatedAt, h.UpdatedAt = sqldb.NewID(), now, now
	raw, text := newSecret()
	h.SecretSealed = s.box.Seal(raw, secretAAD(h.ID))
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		n, err := tx.NewSelect().Model((*Hook)(nil)).Where("org_id = ?", h.OrgID).Count(ctx)
		if err != nil {
			return fmt.Errorf("count event hooks: %w", err)
		}
		if n >= MaxHooksPerOrg {
			return models.Errorf(models.ECONFLICT, "an organization has at most %d event hooks", MaxHooksPerOrg)
		}
		if h.CursorSeq, err = sqldb.NumberAuditEvents(ctx, tx, h.OrgID); err != nil {
			return err
		}
		if _, err = tx.NewInsert().Model(h).Exec(ctx); err != nil {
			return fmt.Errorf("insert event hook: %w", err)
		}
		return record(ctx, h.OrgID, audit.EventHookCreated, hookTarget(h))
	})
	if err != nil {
		return "", err
	}
	return text, nil
}

// Get returns a hook of the organization. ENOTFOUND.
func (s *HookStore) Get(ctx context.Context, orgID, id int64) (*Hook, error) {
	return getHook(ctx, s.db, orgID, id, false)
}

func getHook(ctx context.Context, db bun.IDB, orgID, id int64, forUpdate bool) (*Hook, error) {
	h := new(Hook)
	q := db.NewSelect().Model(h).Where("id = ?", id)
	if orgID != 0 {
		q = q.Where("org_id = ?", orgID)
	}
	if forUpdate {
		q = sqldb.DialectOf(db).LockRows(q, "UPDATE")
	}
	err := q.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrHookNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get event hook: %w", err)
	}
	return h, nil
}

// List lists the organization's hooks.
func (s *HookStore) List(ctx context.Context, orgID int64, p listing.Params) ([]Hook, listing.Meta, error) {
	out := []Hook{}
	q := s.db.NewSelect().Model(&out).Where("org_id = ?", orgID)
	meta, err := listing.Fetch(ctx, q, &out, HookListing, p)
	if err != nil {
		return nil, meta, models.Unavailable(fmt.Errorf("list event hooks: %w", err))
	}
	return out, meta, nil
}

// HookChange is a PATCH of a hook: nil fields stay.
type HookChange struct {
	URL         *string
	Description *string
	EventTypes  []string
	Enabled     *bool
}

// Update changes a hook. Enabling a disabled hook clears its failure
// record and starts it at the events committed from then on (those
// committed while it was disabled are not delivered); its pending
// deliveries resume. ENOTFOUND, EINVALID.
func (s *HookStore) Update(ctx context.Context, orgID, id int64, ch HookChange) (*Hook, error) {
	var out *Hook
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		h, err := getHook(ctx, tx, orgID, id, true)
		if err != nil {
			return err
		}
		before := snapshotOf(h)
		wasEnabled := h.Enabled
		if ch.URL != nil {
			h.URL = *ch.URL
		}
		if ch.Description != nil {
			h.Description = *ch.Description
		}
		if ch.EventTypes != nil {
			h.EventTypes = ch.EventTypes
		}
		if ch.Enabled != nil {
			h.Enabled = *ch.Enabled
		}
		if err = s.check(h); err != nil {
			return err
		}
		if h.Enabled && !wasEnabled {
			h.FailingSince, h.DisabledReason = nil, ""
			if h.CursorSeq, err = sqldb.NumberAuditEvents(ctx, tx, orgID); err != nil {
				return err
			}
		}
		h.UpdatedAt = time.Now().UTC()
		if _, err = tx.NewUpdate().Model(h).Column("url", "description", "event_types", "enabled", "failing_since",
			"disabled_reason", "cursor_seq", "updated_at").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("update event hook: %w", err)
		}
		t := hookTarget(h)
		t.Changes = audit.Changes(before, snapshotOf(h))
		out = h
		return record(ctx, orgID, audit.EventHookUpdated, t)
	})
	return out, err
}

// Delete deletes a hook and its deliveries. ENOTFOUND.
func (s *HookStore) Delete(ctx context.Context, orgID, id int64) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		h, err := getHook(ctx, tx, orgID, id, true)
		if err != nil {
			return err
		}
		if _, err = tx.NewDelete().Model((*Delivery)(nil)).Where("hook_id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("delete event hook deliveries: %w", err)
		}
		if _, err = tx.NewDelete().Model(h).WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("delete event hook: %w", err)
		}
		return record(ctx, orgID, audit.EventHookDeleted, hookTarget(h))
	})
}

// RotateSecret gives the hook a new signing secret, which it returns (shown
// once); the previous one keeps signing for RotationOverlap. ENOTFOUND.
func (s *HookStore) RotateSecret(ctx context.Context, orgID, id int64) (string, error) {
	if s.box == nil {
		return "", errNoBox
	}
	raw, text := newSecret()
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		h, err := getHook(ctx, tx, orgID, id, true)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		expires := now.Add(RotationOverlap)
		h.OldSecretSealed, h.OldSecretExpiresAt = h.SecretSealed, &expires
		h.SecretSealed = s.box.Seal(raw, secretAAD(h.ID))
		h.UpdatedAt = now
		if _, err = tx.NewUpdate().Model(h).Column("secret_sealed", "old_secret_sealed", "old_secret_expires_at", "updated_at").
			WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("rotate event hook secret: %w", err)
		}
		t := hookTarget(h)
		t.Changes = []models.FieldChange{{Field: "secret", Secret: true}}
		return record(ctx, orgID, audit.EventHookSecretRotated, t)
	})
	if err != nil {
		return "", err
	}
	return text, nil
}

// SigningKeys returns the secrets that sign the hook's deliveries now: the
// current one, then the previous one while its overlap lasts.
func (s *HookStore) SigningKeys(h *Hook, now time.Time) ([][]byte, error) {
	if s.box == nil {
		return nil, errNoBox
	}
	cur, err := s.box.Open(h.SecretSealed, secretAAD(h.ID))
	if err != nil {
		return nil, fmt.Errorf("open event hook secret: %w", err)
	}
	keys := [][]byte{cur}
	if h.OldSecretSealed != nil && h.OldSecretExpiresAt != nil && now.Before(*h.OldSecretExpiresAt) {
		old, err := s.box.Open(h.OldSecretSealed, secretAAD(h.ID))
		if err != nil {
			return nil, fmt.Errorf("open event hook secret: %w", err)
		}
		keys = append(keys, old)
	}
	return keys, nil
}

// HookRef names a hook for the dispatcher.
type HookRef struct {
	ID    int64 `bun:"id" json:"id,string"`
	OrgID int64 `bun:"org_id" json:"org_id,string"`
}

// Enabled lists every enabled hook of every organization.
func (s *HookStore) Enabled(ctx context.Context) ([]HookRef, error) {
	var out []HookRef
	err := s.db.NewSelect().Model((*Hook)(nil)).Column("id", "org_id").Where("enabled").Order("id").Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("list enabled event hooks: %w", err)
	}
	return out, nil
}

// LoadForDelivery returns the hook (of any organization) for its
// dispatcher. ENOTFOUND once deleted.
func (s *HookStore) LoadForDelivery(ctx context.Context, id int64) (*Hook, error) {
	return getHook(ctx, s.db, 0, id, false)
}
