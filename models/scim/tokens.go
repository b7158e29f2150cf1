package scim

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/oauthstore"
	"iam/models/sqldb"
)

// TokenPrefix starts every provisioning token, so that the SCIM surface
// tells one from an OAuth access token without asking the database twice.
const TokenPrefix = "iamscim_"

// TokenScopes are the only scopes a provisioning token carries.
var TokenScopes = []string{"svc.scim.ALL"}

// TokenTargetType is the target type of the provisioning token events.
const TokenTargetType = "provisioning_token"

// MaxTokenNameLen caps a token's name.
const MaxTokenNameLen = 256

// lastUsedEvery is how stale last_used_at may get: a token used again
// within it is not written again (a provisioning run sends thousands of
// requests a minute).
const lastUsedEvery = time.Minute

// ProvisioningToken is a long-lived bearer token of one organization for
// /scim/v2 (docs/scim.md). Only the SHA-256 of the token is stored
// (oauthstore.HashClientSecret: 256 random bits, so a fast hash is as
// strong as a slow one).
type ProvisioningToken struct {
	bun.BaseModel `bun:"table:provisioning_tokens"`

	ID         int64      `bun:"id,pk"`
	OrgID      int64      `bun:"org_id"`
	Name       string     `bun:"name"`
	TokenHash  string     `bun:"token_hash"`
	Scopes     string     `bun:"scopes"`
	CreatedAt  time.Time  `bun:"created_at"`
	ExpiresAt  *time.Time `bun:"expires_at"`
	LastUsedAt *time.Time `bun:"last_used_at"`
	RevokedAt  *time.Time `bun:"revoked_at"`
}

// ScopeList returns the token's scopes.
func (t *ProvisioningToken) ScopeList() []string { return strings.Fields(t.Scopes) }

// TokenStore keeps the provisioning tokens.
type TokenStore struct{ db bun.IDB }

// NewTokenStore returns the TokenStore over db.
func NewTokenStore(db bun.IDB) *TokenStore { return &TokenStore{db: db} }

// ErrTokenNotFound is the answer for a token that is not the
// organization's.
var ErrTokenNotFound = models.NotFound("Provisioning token", "the provisioning token does not exist")

// errInvalidToken is every refusal of Authenticate.
var errInvalidToken = errors.New("the provisioning token is unknown, expired or revoked")

func tokenTarget(t *ProvisioningToken) models.EventTarget {
	return audit.Target(TokenTargetType, t.ID, t.Name)
}

// Create makes a provisioning token of the organization named name,
// expiring at expiresAt (nil: never), recording provisioning_token.created,
// and returns the token: shown this once, stored only as its hash.
// EINVALID for an empty or too long name or an expiry not in the future.
func (s *TokenStore) Create(ctx context.Context, orgID int64, name string, expiresAt *time.Time) (*ProvisioningToken, string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return nil, "", models.Invalid("name", "is required")
	case utf8.RuneCountInString(name) > MaxTokenNameLen || !utf8.ValidString(name) || strings.ContainsRune(name, 0):
		return nil, "", models.Invalid("name", "must be valid text of at most %d characters", MaxTokenNameLen)
	case expiresAt != nil && !expiresAt.After(time.Now()):
		return nil, "", models.Invalid("expires_at", "must be in the future")
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	t := &ProvisioningToken{ID: sqldb.NewID(), OrgID: orgID, Name: name, TokenHash: oauthstore.HashClientSecret(secret),
		Scopes: strings.Join(TokenScopes, " "), CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if expiresAt != nil {
		e := expiresAt.UTC().Truncate(time.Microsecond)
		t.ExpiresAt = &e
	}
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(t).Exec(ctx); err != nil {
			return fmt.Errorf("insert provisioning token: %w", err)
		}
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.ProvisioningTokenCreated,
			Targets: []models.EventTarget{tokenTarget(t)}})
	})
	if err != nil {
		return nil, "", err
	}
	return t, secret, nil
}

// List returns the organization's tokens, revoked ones too, newest first.
func (s *TokenStore) List(ctx context.Context, orgID int64) ([]ProvisioningToken, error) {
	out := []ProvisioningToken{}
	if err := s.db.NewSelect().Model(&out).Where("org_id = ?", orgID).OrderExpr("id DESC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list provisioning tokens: %w", err)
	}
	return out, nil
}

// Revoke ends a token of the organization at once (its next request is
// refused), recording provisioning_token.revoked. Revoking a revoked token
// changes nothing and records nothing. ENOTFOUND when it is not the
// organization's.
func (s *TokenStore) Revoke(ctx context.Context, orgID, id int64) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		t := new(ProvisioningToken)
		err := tx.NewSelect().Model(t).Where("org_id = ? AND id = ?", orgID, id).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrTokenNotFound
		}
		if err != nil {
			return fmt.Errorf("select provisioning token: %w", err)
		}
		if t.RevokedAt != nil {
			return nil
		}
		now := time.Now().UTC()
		if _, err := tx.NewUpdate().Model(t).Set("revoked_at = ?", now).WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("revoke provisioning token: %w", err)
		}
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.ProvisioningTokenRevoked,
			Targets: []models.EventTarget{tokenTarget(t)}})
	})
}

// Authenticate returns the live token (not revoked, not expired) whose
// value is secret, and notes its use (at most once a minute). An error for
// any other token; EUNAVAILABLE when the database could not be asked.
func (s *TokenStore) Authenticate(ctx context.Context, secret string) (*ProvisioningToken, error) {
	if !strings.HasPrefix(secret, TokenPrefix) {
		return nil, errInvalidToken
	}
	t := new(ProvisioningToken)
	err := s.db.NewSelect().Model(t).Where("token_hash = ?", oauthstore.HashClientSecret(secret)).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errInvalidToken
	}
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("select provisioning token: %w", err))
	}
	now := time.Now().UTC()
	if t.RevokedAt != nil || t.ExpiresAt != nil && !t.ExpiresAt.After(now) {
		return nil, errInvalidToken
	}
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) > lastUsedEvery {
		// Noting the use is no change of the organization's state: no
		// event, and a failure does not refuse the request.
		_ = sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
			_, err := tx.NewUpdate().Model(t).Set("last_used_at = ?", now).WherePK().Exec(ctx)
			return err
		})
		t.LastUsedAt = &now
	}
	return t, nil
}
