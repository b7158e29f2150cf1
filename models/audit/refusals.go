package audit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/time/rate"

	"iam/models"
	"iam/models/sqldb"
)

// Refusals are the requests the service refused: a 403 (access.denied), a
// failed sign-in (oauth.signin.failed), a refused agent registration of a
// known organization (access.denied). They change nothing, so no change's
// transaction carries them: each is written in a short transaction of its
// own. And since anyone can send them, they are rate-bounded per
// organization, so that a flood of refusals cannot fill the audit table: a
// token bucket per organization (DefaultRefusalRate a second, bursts of
// DefaultRefusalBurst) lets refusals through, and drops those past it,
// counting them (Dropped; the API exports the count as the Prometheus
// counter iam_audit_refusals_dropped_total). The bound is per process: n
// API processes write at most n times the rate.
//
// A refusal that cannot be attributed to an organization (a 401 for an
// unknown or malformed token, a registration with a wrong installation
// key) is not recorded: no organization's log could hold it.

// The default bound of an organization's refusals: DefaultRefusalRate a
// second, in bursts of at most DefaultRefusalBurst.
const (
	DefaultRefusalRate  = 10
	DefaultRefusalBurst = 100
)

// refusalWriteTimeout bounds the transaction of one refusal. It does not
// end with the request: a client that hangs up at once is recorded too.
const refusalWriteTimeout = 5 * time.Second

// maxRefusalBuckets is how many organizations' buckets Refusals keeps
// before it forgets the full ones (a full bucket is as good as none).
const maxRefusalBuckets = 10_000

// Refusals records refusals in the audit log, rate-bounded per
// organization. It is safe for concurrent use.
type Refusals struct {
	limit rate.Limit
	burst int
	// now is the clock of the buckets (time.Now; tests set another).
	now func() time.Time

	mu      sync.Mutex
	buckets map[int64]*rate.Limiter
	pruneAt int

	dropped atomic.Int64
}

// NewRefusals returns a Refusals that writes at most perSecond refusals a
// second of each organization, in bursts of at most burst.
func NewRefusals(perSecond float64, burst int) *Refusals {
	return &Refusals{limit: rate.Limit(perSecond), burst: burst, now: time.Now,
		buckets: map[int64]*rate.Limiter{}, pruneAt: maxRefusalBuckets}
}

// Record writes ev, a refusal, in a transaction of its own on db (so never
// in the transaction of a change: a refusal changed nothing), unless its
// organization's bucket is empty: then it counts it as dropped and returns
// nil. ev.Result must be models.ResultDenied (the default) or
// models.ResultFailure; ev.Reason says why, and neither it nor the targets
// may hold anything secret the refused request sent. The actor, client and
// request come from ctx's Origin, as for any event. EINVALID for another
// result or an event of no organization.
func (r *Refusals) Record(ctx context.Context, db *bun.DB, ev models.AuditEvent) error {
	switch ev.Result {
	case "":
		ev.Result = models.ResultDenied
	case models.ResultDenied, models.ResultFailure:
	default:
		return models.Errorf(models.EINVALID, "a refusal's result is %s or %s, not %q", models.ResultDenied, models.ResultFailure, ev.Result)
	}
	if ev.OrgID == 0 {
		return models.Errorf(models.EINVALID, "a refusal of no organization cannot be recorded")
	}
	if !r.allow(ev.OrgID) {
		r.dropped.Add(1)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refusalWriteTimeout)
	defer cancel()
	err := sqldb.InTx(ctx, db, func(ctx context.Context, _ bun.Tx) error {
		return models.Record(ctx, ev)
	})
	if err != nil {
		return fmt.Errorf("record refusal %s: %w", ev.Type, err)
	}
	return nil
}

// Dropped returns how many refusals were past their organization's bound
// and not written.
func (r *Refusals) Dropped() int64 { return r.dropped.Load() }

// allow takes a token from the organization's bucket, if it holds one.
func (r *Refusals) allow(orgID int64) bool {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.buckets[orgID]
	if !ok {
		if len(r.buckets) >= r.pruneAt {
			r.prune(now)
		}
		b = rate.NewLimiter(r.limit, r.burst)
		r.buckets[orgID] = b
	}
	return b.AllowN(now, 1)
}

// prune forgets the buckets that are full again, and sets when to prune
// next (twice as many as remain, at least maxRefusalBuckets), so that the
// map stays bounded by the organizations refused lately.
func (r *Refusals) prune(now time.Time) {
	for org, b := range r.buckets {
		if b.TokensAt(now) >= float64(r.burst) {
			delete(r.buckets, org)
		}
	}
	r.pruneAt = max(maxRefusalBuckets, 2*len(r.buckets))
}

// RefusalLog is Refusals over the service's database: what the API and the
// authorization server record refusals through.
type RefusalLog struct {
	db     *bun.DB
	limits *Refusals
}

// NewRefusalLog returns the RefusalLog writing to db within limits.
func NewRefusalLog(db *bun.DB, limits *Refusals) *RefusalLog {
	return &RefusalLog{db: db, limits: limits}
}

// Record writes the refusal ev (Refusals.Record).
func (l *RefusalLog) Record(ctx context.Context, ev models.AuditEvent) error {
	return l.limits.Record(ctx, l.db, ev)
}

// Dropped returns how many refusals were past their bound
// (Refusals.Dropped).
func (l *RefusalLog) Dropped() int64 { return l.limits.Dropped() }
