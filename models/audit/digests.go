package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/listing"
	"iam/models/sqldb"
)

// A digest seals a run of an organization's events: the events after the
// previous digest up to the last one committed when it was made, by the
// SHA-256 of their hashes in sequence order. Each digest names the hash of
// the one before it, so the digests form a chain, and is signed with the
// service's Ed25519 key: whoever holds the public key can check, offline,
// that no sealed event was altered, removed or added, and that no digest
// was (docs/audit.md).

// Digest is a sealed run of events, as stored and shown.
type Digest struct {
	bun.BaseModel `bun:"table:audit_digests"`

	OrgID        int64     `bun:"org_id,pk" json:"org_id,string"`
	Number       int64     `bun:"number,pk" json:"number"`
	FromSeq      int64     `bun:"from_seq" json:"from_sequence"`
	ToSeq        int64     `bun:"to_seq" json:"to_sequence"`
	EventCount   int64     `bun:"event_count" json:"event_count"`
	PeriodStart  time.Time `bun:"period_start" json:"period_start"`
	PeriodEnd    time.Time `bun:"period_end" json:"period_end"`
	EventsHash   string    `bun:"events_hash" json:"events_hash"`
	PreviousHash string    `bun:"previous_hash" json:"previous_hash"`
	DigestHash   string    `bun:"digest_hash" json:"digest_hash"`
	Signature    string    `bun:"signature" json:"signature"`
	KeyID        string    `bun:"key_id" json:"key_id"`
	CreatedAt    time.Time `bun:"created_at" json:"created_at"`
}

// signedDigest is the canonical form of a digest: the JSON whose SHA-256 is
// its digest_hash and whose Ed25519 signature is its signature.
type signedDigest struct {
	OrgID        string `json:"org_id"`
	Number       int64  `json:"number"`
	FromSeq      int64  `json:"from_sequence"`
	ToSeq        int64  `json:"to_sequence"`
	EventCount   int64  `json:"event_count"`
	PeriodStart  string `json:"period_start"`
	PeriodEnd    string `json:"period_end"`
	EventsHash   string `json:"events_hash"`
	PreviousHash string `json:"previous_hash"`
	KeyID        string `json:"key_id"`
}

// canonical returns the bytes d's hash and signature cover.
func (d *Digest) canonical() []byte {
	// Strings and integers only: Marshal cannot fail.
	b, _ := json.Marshal(signedDigest{
		OrgID: models.FormatID(d.OrgID), Number: d.Number, FromSeq: d.FromSeq, ToSeq: d.ToSeq, EventCount: d.EventCount,
		PeriodStart: d.PeriodStart.UTC().Format(time.RFC3339Nano), PeriodEnd: d.PeriodEnd.UTC().Format(time.RFC3339Nano),
		EventsHash: d.EventsHash, PreviousHash: d.PreviousHash, KeyID: d.KeyID,
	})
	return b
}

// Signer signs digests with an Ed25519 key.
type Signer struct {
	key   ed25519.PrivateKey
	keyID string
}

// NewSigner returns the signer of the 32-byte Ed25519 seed.
func NewSigner(seed []byte) (*Signer, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("an audit signing key is %d bytes, not %d", ed25519.SeedSize, len(seed))
	}
	key := ed25519.NewKeyFromSeed(seed)
	pub, _ := key.Public().(ed25519.PublicKey)
	return &Signer{key: key, keyID: KeyID(pub)}, nil
}

// PublicKey is the key that checks the signer's digests.
func (s *Signer) PublicKey() ed25519.PublicKey {
	pub, _ := s.key.Public().(ed25519.PublicKey)
	return pub
}

// KeyID names a public key in digests: the first 8 bytes of its SHA-256,
// in hex.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// DigestListing is the paging of GET /audit-digests: oldest first, offset
// paging (from, limit), no filter.
var DigestListing = listing.MustSchema(listing.Schema{
	Name:         "audit_digests",
	Key:          "number",
	Attributes:   []listing.Attribute{{Name: "number"}},
	DefaultLimit: 100,
	MaxLimit:     1000,
	Paging:       listing.OffsetPaging,
})

// DigestStore seals and lists an organization's digests.
type DigestStore struct{ db *bun.DB }

// NewDigestStore returns the DigestStore over db.
func NewDigestStore(db *bun.DB) *DigestStore { return &DigestStore{db: db} }

// sealBatch is how many events Seal and Verify read at a time.
const sealBatch = 10000

// sealRow is what sealing reads of an event: its number and hash.
type sealRow struct {
	bun.BaseModel `bun:"table:audit_events"`

	Sequence int64  `bun:"seq"`
	Hash     string `bun:"hash"`
}

// decodeHash decodes a SHA-256 written in hex into sum; false when text is
// not one.
func decodeHash(sum *[sha256.Size]byte, text string) bool {
	if len(text) != 2*sha256.Size {
		return false
	}
	for i := range sum {
		hi, lo := unhex(text[2*i]), unhex(text[2*i+1])
		if hi > 0xf || lo > 0xf {
			return false
		}
		sum[i] = hi<<4 | lo
	}
	return true
}

// unhex is the value of a hex digit; 0xff for another character.
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 0xff
}

// Seal seals the organization's events committed since its last digest
// into the next digest, signed by signer, and returns it; nil when there
// was nothing to seal. Events that commit while it runs are numbered after
// the ones it reads and go to the next digest.
func (s *DigestStore) Seal(ctx context.Context, orgID int64, signer *Signer, now time.Time) (*Digest, error) {
	prev, err := s.last(ctx, orgID)
	if err != nil {
		return nil, err
	}
	head, err := sqldb.NumberAuditEvents(ctx, s.db, orgID)
	if err != nil {
		return nil, err
	}
	d := &Digest{OrgID: orgID, Number: 1, FromSeq: 1, ToSeq: head, PeriodEnd: now.UTC().Truncate(time.Microsecond), KeyID: signer.keyID}
	if prev != nil {
		d.Number, d.FromSeq, d.PreviousHash, d.PeriodStart = prev.Number+1, prev.ToSeq+1, prev.DigestHash, prev.PeriodEnd
	}
	if d.ToSeq < d.FromSeq {
		return nil, nil
	}
	if prev == nil {
		// The first digest's period starts with the first event.
		err := s.db.NewSelect().Model((*sqldb.AuditEventRow)(nil)).Column("published").
			Where("org_id = ? AND seq = ?", orgID, d.FromSeq).Scan(ctx, &d.PeriodStart)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("seal audit events of organization %d: event %d is missing", orgID, d.FromSeq)
		}
		if err != nil {
			return nil, models.Unavailable(fmt.Errorf("read the first audit event: %w", err))
		}
	}
	h := sha256.New()
	next := d.FromSeq
	// Only the columns sealing needs, into rows reused batch after batch.
	rows := make([]sealRow, 0, sealBatch)
	var leaf [sha256.Size]byte
	for next <= d.ToSeq {
		err := s.db.NewSelect().Model(&rows).Column("seq", "hash").
			Where("org_id = ? AND seq >= ? AND seq <= ?", orgID, next, d.ToSeq).OrderExpr("seq").Limit(sealBatch).Scan(ctx)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, models.Unavailable(fmt.Errorf("read audit events to seal: %w", err))
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("seal audit events of organization %d: events %d to %d are missing", orgID, next, d.ToSeq)
		}
		for _, r := range rows {
			if r.Sequence != next {
				return nil, fmt.Errorf("seal audit events of organization %d: event %d is missing", orgID, next)
			}
			if !decodeHash(&leaf, r.Hash) {
				return nil, fmt.Errorf("seal audit event %d of organization %d: its hash %q is not a SHA-256 in hex", r.Sequence, orgID, r.Hash)
			}
			h.Write(leaf[:])
			next++
		}
	}
	d.EventCount = d.ToSeq - d.FromSeq + 1
	d.EventsHash = hex.EncodeToString(h.Sum(nil))
	canon := d.canonical()
	sum := sha256.Sum256(canon)
	d.DigestHash = hex.EncodeToString(sum[:])
	d.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(signer.key, canon))
	d.CreatedAt = time.Now().UTC()
	if _, err := s.db.NewInsert().Model(d).Exec(ctx); err != nil {
		if sqldb.IsUniqueViolation(err) {
			return nil, models.Errorf(models.ECONFLICT, "digest %d of organization %d was made by another seal", d.Number, orgID)
		}
		return nil, models.Unavailable(fmt.Errorf("insert audit digest: %w", err))
	}
	return d, nil
}

// last returns the organization's newest digest; nil when it has none.
func (s *DigestStore) last(ctx context.Context, orgID int64) (*Digest, error) {
	d := new(Digest)
	err := s.db.NewSelect().Model(d).Where("org_id = ?", orgID).OrderExpr("number DESC").Limit(1).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, models.Unavailable(fmt.Errorf("read the last audit digest: %w", err))
	}
	return d, nil
}

// List returns the organization's digests from number from on, at most
// limit, oldest first.
func (s *DigestStore) List(ctx context.Context, orgID, from int64, limit int) ([]Digest, error) {
	var out []Digest
	err := s.db.NewSelect().Model(&out).Where("org_id = ? AND number >= ?", orgID, from).
		OrderExpr("number").Limit(int64(limit)).Scan(ctx)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, models.Unavailable(fmt.Errorf("list audit digests: %w", err))
	}
	return out, nil
}

// Orgs returns the organizations that have events, numbered or not yet,
// for the seal schedule.
func (s *DigestStore) Orgs(ctx context.Context) ([]int64, error) {
	pending, err := sqldb.PendingAuditOrgs(ctx, s.db)
	if err != nil {
		return nil, err
	}
	var orgs []int64
	if err = s.db.NewSelect().Table("audit_heads").Column("org_id").Scan(ctx, &orgs); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, models.Unavailable(fmt.Errorf("list audited organizations: %w", err))
	}
	orgs = append(orgs, pending...)
	slices.Sort(orgs)
	return slices.Compact(orgs), nil
}

// Count returns how many digests the organization has.
func (s *DigestStore) Count(ctx context.Context, orgID int64) (int64, error) {
	n, err := s.db.NewSelect().Model((*Digest)(nil)).Where("org_id = ?", orgID).Count(ctx)
	if err != nil {
		return 0, models.Unavailable(fmt.Errorf("count audit digests: %w", err))
	}
	return int64(n), nil
}
