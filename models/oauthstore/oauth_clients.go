package oauthstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/sqldb"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// ClientType is an OAuth client's registration type (spec 5).
type ClientType string

// The registration types. Browser and the two mobile types are public
// clients: they cannot keep a secret, get none, and must use PKCE (S256).
// Server, self and service clients are confidential: they authenticate with
// their secret. A service client acts for itself, not for a user: it gets
// its tokens with the client credentials grant, holding the scopes it was
// registered with (ServiceScopes).
const (
	ClientBrowser          ClientType = "browser"            // client-based: runs in the browser only
	ClientServer           ClientType = "server"             // server-based: a web application with a back end
	ClientMobile           ClientType = "mobile"             // mobile-based: a mobile application
	ClientNonBrowserMobile ClientType = "non-browser-mobile" // a device application without a browser of its own
	ClientSelf             ClientType = "self"               // self client: back-end tasks and scripts of the organization
	ClientService          ClientType = "service"            // service client: a provisioning engine, client credentials grant only
)

// ClientTypes lists every registration type.
var ClientTypes = []ClientType{ClientBrowser, ClientServer, ClientMobile, ClientNonBrowserMobile, ClientSelf, ClientService}

// ServiceScopes are the scopes a service client may hold: the SCIM
// provisioning surface's (/scim/v2), and nothing of /api/v1, whose every
// route acts for a user.
var ServiceScopes = []string{"svc.scim.READ", "svc.scim.WRITE", "svc.scim.CREATE", "svc.scim.UPDATE", "svc.scim.DELETE", "svc.scim.ALL"}

// Public reports whether clients of the type have no secret.
func (t ClientType) Public() bool {
	return t == ClientBrowser || t == ClientMobile || t == ClientNonBrowserMobile
}

// Limits of a client registration.
const (
	maxClientNameLen   = 200
	maxRedirectURIs    = 20
	maxRedirectURILen  = 2000
	clientIDRandomLen  = 15 // bytes: 24 base32 characters
	clientSecretRandom = 32 // bytes: 256 bits
)

// OAuthClient is an application registered with the authorization server.
// It belongs to one organization: its users sign in to that organization.
type OAuthClient struct {
	bun.BaseModel `bun:"table:oauth_clients"`

	ID           string     `bun:"id,pk" json:"client_id"`
	OrgID        int64      `bun:"org_id" json:"org_id,string"`
	Name         string     `bun:"name" json:"name"`
	HomepageURL  string     `bun:"homepage_url" json:"homepage_url"`
	Type         ClientType `bun:"type" json:"type"`
	RedirectURIs []string   `bun:"redirect_uris,type:json" json:"redirect_uris"`
	// SecretHash is the hex SHA-256 of the secret; empty for public clients.
	// The secret is 256 random bits, so a fast hash is as strong as a slow
	// one and keeps the token endpoint cheap.
	SecretHash string `bun:"secret_hash" json:"-"`
	// Scopes are what a service client may be granted (ServiceScopes, each
	// at most once, in their canonical spelling); empty for the other types,
	// whose grants depend on the user.
	Scopes    []string  `bun:"scopes,type:json" json:"scopes"`
	CreatedAt time.Time `bun:"created_at" json:"created_at"`
}

// HashClientSecret returns the stored form of a client secret.
func HashClientSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// ClientSecretMatches reports, in constant time, whether secret hashes to
// hash. An empty hash matches nothing.
func ClientSecretMatches(hash, secret string) bool {
	if hash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(hash), []byte(HashClientSecret(secret))) == 1
}

// ClientStore reads and writes OAuth clients.
type ClientStore struct{ db bun.IDB }

// NewClientStore returns the ClientStore over db (the database or a transaction).
func NewClientStore(db bun.IDB) *ClientStore { return &ClientStore{db: db} }

// ErrClientNotFound is the answer for an unknown client.
var ErrClientNotFound = models.NotFound("Client", "the OAuth client does not exist")

// Create registers client, filling its id and creation time, recording
// oauth.client.created, and returns its secret: shown once, stored only
// hashed, never in the event; empty for public types. EINVALID when the
// name, type, homepage URL, a redirect URI or a scope breaks its rule.
func (s *ClientStore) Create(ctx context.Context, client *OAuthClient) (secret string, err error) {
	if err = client.validate(); err != nil {
		return "", err
	}
	client.ID = strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(randomBytes(clientIDRandomLen)))
	client.SecretHash = ""
	if !client.Type.Public() {
		secret = base64.RawURLEncoding.EncodeToString(randomBytes(clientSecretRandom))
		client.SecretHash = HashClientSecret(secret)
	}
	if client.RedirectURIs == nil {
		client.RedirectURIs = []string{}
	}
	if client.Scopes == nil {
		client.Scopes = []string{}
	}
	client.CreatedAt = time.Now().UTC()
	err = sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if _, insertErr := tx.NewInsert().Model(client).Exec(ctx); insertErr != nil {
			return fmt.Errorf("insert OAuth client: %w", insertErr)
		}
		return models.Record(ctx, models.AuditEvent{OrgID: client.OrgID, Type: audit.OAuthClientCreated,
			Targets: []models.EventTarget{clientTarget(client.ID, client.Name)}})
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// ClientTargetType is the target type of the OAuth client events.
const ClientTargetType = "oauth_client"

// clientTarget names client id (its secret never appears in an event).
func clientTarget(id, name string) models.EventTarget {
	return models.EventTarget{Type: ClientTargetType, ID: id, DisplayName: name}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}

// validate checks a registration before it is stored.
func (c *OAuthClient) validate() error {
	c.Name = strings.TrimSpace(c.Name)
	switch {
	case c.OrgID == 0:
		return models.Invalid("org_id", "is required")
	case c.Name == "":
		return models.Invalid("name", "is required")
	case len(c.Name) > maxClientNameLen:
		return models.Invalid("name", "must be at most %d characters", maxClientNameLen)
	}
	known := false
	for _, t := range ClientTypes {
		known = known || t == c.Type
	}
	if !known {
		return models.Invalid("type", "must be one of browser, server, mobile, non-browser-mobile, self, service")
	}
	if err := c.validateScopes(); err != nil {
		return err
	}
	if c.HomepageURL != "" {
		u, err := url.Parse(c.HomepageURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return models.Invalid("homepage_url", "must be an http or https URL")
		}
	} else if c.Type == ClientServer {
		return models.Invalid("homepage_url", "is required for a server-based client")
	}
	switch {
	case c.Type == ClientSelf && len(c.RedirectURIs) > 0:
		return models.Invalid("redirect_uris", "a self client has no redirect URIs: it gets its tokens from `iam token`")
	case c.Type == ClientService && len(c.RedirectURIs) > 0:
		return models.Invalid("redirect_uris", "a service client has no redirect URIs: it gets its tokens with grant_type=client_credentials")
	case c.Type == ClientSelf || c.Type == ClientService:
	case len(c.RedirectURIs) == 0:
		return models.Invalid("redirect_uris", "at least one redirect URI is required")
	case len(c.RedirectURIs) > maxRedirectURIs:
		return models.Invalid("redirect_uris", "at most %d redirect URIs", maxRedirectURIs)
	}
	for _, raw := range c.RedirectURIs {
		if err := checkRedirectURI(raw, c.Type); err != nil {
			return err
		}
	}
	return nil
}

// validateScopes checks a service client's scopes, each one of
// ServiceScopes (the operation word in any case; stored as ServiceScopes
// spells it, duplicates dropped), at least one; the other types hold none.
func (c *OAuthClient) validateScopes() error {
	if c.Type != ClientService {
		if len(c.Scopes) > 0 {
			return models.Invalid("scopes", "only a service client holds scopes; a %s client's grants depend on its user", c.Type)
		}
		return nil
	}
	if len(c.Scopes) == 0 {
		return models.Invalid("scopes", "a service client needs at least one scope: %s", strings.Join(ServiceScopes, ", "))
	}
	out := make([]string, 0, len(c.Scopes))
	for _, raw := range c.Scopes {
		scope := ""
		if op, ok := strings.CutPrefix(strings.TrimSpace(raw), "svc.scim."); ok {
			if i := slices.Index(ServiceScopes, "svc.scim."+strings.ToUpper(op)); i >= 0 {
				scope = ServiceScopes[i]
			}
		}
		if scope == "" {
			return models.Invalid("scopes", "a service client may hold only svc.scim scopes (%s): %q is not one", strings.Join(ServiceScopes, ", "), raw)
		}
		if !slices.Contains(out, scope) {
			out = append(out, scope)
		}
	}
	c.Scopes = out
	return nil
}

// checkRedirectURI accepts an absolute URI without fragment: https; http on
// a loopback host only; a private scheme (com.example.app:/cb) for the mobile
// types only.
func checkRedirectURI(raw string, t ClientType) error {
	bad := func(why string) error { return models.Invalid("redirect_uris", "%q %s", raw, why) }
	if len(raw) > maxRedirectURILen {
		return models.Invalid("redirect_uris", "a redirect URI must be at most %d characters", maxRedirectURILen)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs():
		return bad("is not an absolute URI")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return bad("must not have a fragment")
	}
	switch u.Scheme {
	case "https":
		if u.Host == "" {
			return bad("has no host")
		}
	case "http":
		host := u.Hostname()
		ip := net.ParseIP(host)
		if host != "localhost" && !strings.HasSuffix(host, ".localhost") && (ip == nil || !ip.IsLoopback()) {
			return bad("must use https (http is allowed on loopback hosts only)")
		}
	default:
		if t != ClientMobile && t != ClientNonBrowserMobile {
			return bad("must use https (private schemes are for mobile clients)")
		}
	}
	return nil
}

// Get returns a client by its id, whatever its organization (the id names
// the organization). ENOTFOUND when missing.
func (s *ClientStore) Get(ctx context.Context, id string) (*OAuthClient, error) {
	client := new(OAuthClient)
	err := s.db.NewSelect().Model(client).Where("id = ?", id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrClientNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select OAuth client: %w", err)
	}
	return client, nil
}

// List returns the organization's clients, oldest first.
func (s *ClientStore) List(ctx context.Context, orgID int64) ([]OAuthClient, error) {
	var clients []OAuthClient
	err := s.db.NewSelect().Model(&clients).Where("org_id = ?", orgID).Order("created_at", "id").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select OAuth clients: %w", err)
	}
	return clients, nil
}

// FirstOfType returns the organization's oldest client of type t.
// ENOTFOUND when there is none.
func (s *ClientStore) FirstOfType(ctx context.Context, orgID int64, t ClientType) (*OAuthClient, error) {
	client := new(OAuthClient)
	err := s.db.NewSelect().Model(client).Where("org_id = ? AND type = ?", orgID, t).
		Order("created_at", "id").Limit(1).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrClientNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select OAuth client: %w", err)
	}
	return client, nil
}

// Delete removes a client of the organization and, with it, every code and
// token it holds, recording oauth.client.deleted. ENOTFOUND when missing.
func (s *ClientStore) Delete(ctx context.Context, orgID int64, id string) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		// Said plainly rather than left to ON DELETE CASCADE, which SQLite
		// applies only where foreign keys are on.
		if _, err := tx.NewDelete().Model((*OAuthToken)(nil)).Where("client_id = ? AND org_id = ?", id, orgID).Exec(ctx); err != nil {
			return fmt.Errorf("delete the client's tokens: %w", err)
		}
		var name []string
		err := tx.NewDelete().Model((*OAuthClient)(nil)).Where("org_id = ? AND id = ?", orgID, id).
			Returning("name").Scan(ctx, &name)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delete OAuth client: %w", err)
		}
		if len(name) == 0 {
			return ErrClientNotFound
		}
		return models.Record(ctx, models.AuditEvent{OrgID: orgID, Type: audit.OAuthClientDeleted,
			Targets: []models.EventTarget{clientTarget(id, name[0])}})
	})
}
