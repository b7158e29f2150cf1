package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models"
	"time"

	"github.com/uptrace/bun"
)

// Idempotency keys: a client that sends a job-starting request with an
// Idempotency-Key gets the first answer again for the key's life, and at
// most one job, even when the process that took the first request died
// half-way and the retry reaches another one (docs/operations.md).
//
// The life of a key's record:
//  1. Reserve writes it in flight (Status 0), owned by a fresh token until
//     LockedUntil; the owner renews the lease while the request runs.
//  2. The job the request writes claims the record in the job's own
//     transaction (InsertJob: job_id set where the token still owns it), so
//     that the job and the record commit together or not at all.
//  3. Complete records the answer (before it is sent), or Release gives the
//     key back when there is nothing worth replaying and no job was written.
//
// A record in flight whose lease ran out belongs to a process that died or
// stalled: without a job, the next request with the key takes it over (a new
// token; the old owner's job insert then fails its claim and rolls back);
// with a job, its answer is lost and the job is what the key stands for.

// Idempotency key limits.
const (
	// MaxIdempotencyKeyLen bounds a key (bytes of visible ASCII).
	MaxIdempotencyKeyLen = 255
	// MaxIdempotentAnswer bounds a recorded answer body.
	MaxIdempotentAnswer = 256 << 10
)

// IdemKey names a key: per organization and OAuth client.
type IdemKey struct {
	OrgID    int64
	ClientID string
	Key      string
}

// IdempotencyRecord is the stored state of a key.
type IdempotencyRecord struct {
	bun.BaseModel `bun:"table:idempotency_keys"`

	OrgID       int64     `bun:"org_id,pk"`
	ClientID    string    `bun:"client_id,pk"`
	Key         string    `bun:"idem_key,pk"`
	Route       string    `bun:"route"`
	Token       string    `bun:"token"`
	LockedUntil time.Time `bun:"locked_until"`
	JobID       *int64    `bun:"job_id"`
	// Fingerprint is the hash of the first request (route, path, query,
	// content type, body); empty until its answer is recorded.
	Fingerprint string    `bun:"fingerprint"`
	Status      int       `bun:"status"` // the answer's HTTP status; 0 while in flight
	ContentType string    `bun:"content_type"`
	Location    string    `bun:"location"`
	Body        []byte    `bun:"body"`
	CreatedAt   time.Time `bun:"created_at"`
	ExpiresAt   time.Time `bun:"expires_at"`
}

// InFlight reports whether the record's request has no recorded answer.
func (r *IdempotencyRecord) InFlight() bool { return r.Status == 0 }

// IdempotentAnswer is an answer to record.
type IdempotentAnswer struct {
	Fingerprint string
	Status      int
	ContentType string
	Location    string
	Body        []byte
}

// IdempotencyStore keeps the idempotency keys.
type IdempotencyStore struct {
	db *bun.DB
}

// NewIdempotencyStore returns the IdempotencyStore over db.
func NewIdempotencyStore(db *bun.DB) *IdempotencyStore { return &IdempotencyStore{db: db} }

// ErrIdempotencyClaimLost is the error of a job insert whose request no
// longer owns its idempotency key: its lease ran out and another request
// with the key took it over. The job's transaction rolls back.
var ErrIdempotencyClaimLost = &models.Error{Code: models.ECONFLICT, Title: "Idempotency Key Taken Over",
	Detail: "another request with the same Idempotency-Key took it over while this one ran; nothing was written"}

// IdempotencyClaim is the key a request holds, carried in its context to
// the transaction that writes its job (WithIdempotencyClaim).
type IdempotencyClaim struct {
	Key   IdemKey
	Token string
}

type idempotencyClaimKey struct{}

// WithIdempotencyClaim returns ctx carrying claim: a job written under it
// claims the key in the job's transaction.
func WithIdempotencyClaim(ctx context.Context, claim *IdempotencyClaim) context.Context {
	return context.WithValue(ctx, idempotencyClaimKey{}, claim)
}

// claimJob records job as the job of the key the context's request holds,
// inside the job's transaction db. Without a claim it does nothing.
func claimJob(ctx context.Context, db bun.IDB, job *Job) error {
	claim, _ := ctx.Value(idempotencyClaimKey{}).(*IdempotencyClaim)
	if claim == nil {
		return nil
	}
	if claim.Key.OrgID != job.OrgID {
		return fmt.Errorf("idempotency claim of organization %d on a job of organization %d", claim.Key.OrgID, job.OrgID)
	}
	res, err := db.NewUpdate().Model((*IdempotencyRecord)(nil)).
		Set("job_id = ?", job.ID).
		Where(idemWhere, claim.Key.OrgID, claim.Key.ClientID, claim.Key.Key).
		Where("token = ? AND status = 0 AND job_id IS NULL", claim.Token).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("claim idempotency key: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return ErrIdempotencyClaimLost
	}
	return nil
}

// idemWhere selects the record of a key.
const idemWhere = "org_id = ? AND client_id = ? AND idem_key = ?"

// Reserve takes key k for a request of route owned by token, until now +
// lease; the record lives ttl. reserved is true when the request may run.
// Otherwise rec is the key's record: in flight under another owner (its
// lease alive, or a job written), or answered. An expired record is
// replaced; an abandoned one without a job (its lease out) is taken over.
func (s *IdempotencyStore) Reserve(ctx context.Context, k IdemKey, route, token string, lease, ttl time.Duration) (rec *IdempotencyRecord, reserved bool, err error) {
	if k.Key == "" || len(k.Key) > MaxIdempotencyKeyLen {
		return nil, false, models.Invalid("Idempotency-Key", "must be 1 to %d characters", MaxIdempotencyKeyLen)
	}
	for attempt := 0; attempt < 3; attempt++ {
		now := time.Now().UTC()
		rec = &IdempotencyRecord{OrgID: k.OrgID, ClientID: k.ClientID, Key: k.Key, Route: route, Token: token,
			LockedUntil: now.Add(lease), CreatedAt: now, ExpiresAt: now.Add(ttl)}
		res, err := s.db.NewInsert().Model(rec).On("CONFLICT (org_id, client_id, idem_key) DO NOTHING").Exec(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("reserve idempotency key: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return rec, true, nil
		}
		cur := new(IdempotencyRecord)
		err = s.db.NewSelect().Model(cur).Where(idemWhere, k.OrgID, k.ClientID, k.Key).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			continue // swept meanwhile: insert again
		}
		if err != nil {
			return nil, false, fmt.Errorf("read idempotency key: %w", err)
		}
		switch {
		case !cur.ExpiresAt.After(now):
			// Expired but not swept yet: replace it, if nobody did first.
			if _, err := s.db.NewDelete().Model((*IdempotencyRecord)(nil)).
				Where(idemWhere, k.OrgID, k.ClientID, k.Key).
				Where("token = ?", cur.Token).Exec(ctx); err != nil {
				return nil, false, fmt.Errorf("replace expired idempotency key: %w", err)
			}
			continue
		case cur.InFlight() && cur.JobID == nil && !cur.LockedUntil.After(now):
			// Abandoned before it wrote anything: take it over.
			res, err := s.db.NewUpdate().Model((*IdempotencyRecord)(nil)).
				Set("token = ?, locked_until = ?, route = ?", token, now.Add(lease), route).
				Where(idemWhere, k.OrgID, k.ClientID, k.Key).
				Where("token = ? AND status = 0 AND job_id IS NULL", cur.Token).Exec(ctx)
			if err != nil {
				return nil, false, fmt.Errorf("take over idempotency key: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				cur.Token, cur.LockedUntil, cur.Route = token, now.Add(lease), route
				return cur, true, nil
			}
			continue
		}
		return cur, false, nil
	}
	return nil, false, models.Errorf(models.ECONFLICT, "the Idempotency-Key changed hands while it was being reserved; try again")
}

// Renew extends the lease of the key token owns; false when it no longer
// owns it in flight.
func (s *IdempotencyStore) Renew(ctx context.Context, k IdemKey, token string, lease time.Duration) (bool, error) {
	res, err := s.db.NewUpdate().Model((*IdempotencyRecord)(nil)).
		Set("locked_until = ?", time.Now().UTC().Add(lease)).
		Where(idemWhere, k.OrgID, k.ClientID, k.Key).
		Where("token = ? AND status = 0", token).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("renew idempotency key: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// Complete records the answer of the key token owns. False when it no
// longer owns it (taken over: the answer is not recorded).
func (s *IdempotencyStore) Complete(ctx context.Context, k IdemKey, token string, a IdempotentAnswer) (bool, error) {
	if a.Status < 100 || len(a.Body) > MaxIdempotentAnswer {
		return false, models.Invalid("answer", "status %d with %d bytes cannot be recorded", a.Status, len(a.Body))
	}
	res, err := s.db.NewUpdate().Model((*IdempotencyRecord)(nil)).
		Set("status = ?, fingerprint = ?, content_type = ?, location = ?, body = ?", a.Status, a.Fingerprint, a.ContentType, a.Location, a.Body).
		Where(idemWhere, k.OrgID, k.ClientID, k.Key).
		Where("token = ? AND status = 0", token).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("record idempotent answer: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// Release gives back the key token owns when its request wrote no job (an
// answer not worth replaying: an outage, a limit, an unread body). It
// returns the key's record when the request did write a job, which then
// stays the key's (the caller records the answer instead).
func (s *IdempotencyStore) Release(ctx context.Context, k IdemKey, token string) (*IdempotencyRecord, error) {
	if _, err := s.db.NewDelete().Model((*IdempotencyRecord)(nil)).
		Where(idemWhere, k.OrgID, k.ClientID, k.Key).
		Where("token = ? AND status = 0 AND job_id IS NULL", token).Exec(ctx); err != nil {
		return nil, fmt.Errorf("release idempotency key: %w", err)
	}
	cur := new(IdempotencyRecord)
	err := s.db.NewSelect().Model(cur).Where(idemWhere, k.OrgID, k.ClientID, k.Key).
		Where("token = ?", token).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	return cur, nil
}

// Get returns the record of k. ENOTFOUND when there is none.
func (s *IdempotencyStore) Get(ctx context.Context, k IdemKey) (*IdempotencyRecord, error) {
	cur := new(IdempotencyRecord)
	err := s.db.NewSelect().Model(cur).Where(idemWhere, k.OrgID, k.ClientID, k.Key).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, models.NotFound("Idempotency Key", "no record of this key")
	}
	if err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	return cur, nil
}

// Sweep deletes the records that expired before now, a batch at a time,
// and returns how many.
func (s *IdempotencyStore) Sweep(ctx context.Context, now time.Time) (int64, error) {
	var total int64
	for {
		sub := s.db.NewSelect().Model((*IdempotencyRecord)(nil)).Column("org_id", "client_id", "idem_key").
			Where("expires_at <= ?", now.UTC()).Limit(1000)
		res, err := s.db.NewDelete().Model((*IdempotencyRecord)(nil)).
			Where("(org_id, client_id, idem_key) IN (?)", sub).Exec(ctx)
		if err != nil {
			return total, fmt.Errorf("sweep idempotency keys: %w", err)
		}
		n, _ := res.RowsAffected()
		total += n
		if n < 1000 {
			return total, nil
		}
	}
}
