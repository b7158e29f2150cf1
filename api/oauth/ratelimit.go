package oauth

import (
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"iam/api/clientaddr"
)

// limiter is a token bucket per client address. Buckets idle long enough to
// have refilled are dropped, so memory follows the number of active clients.
type limiter struct {
	limit rate.Limit
	burst int
	idle  time.Duration // after this long unseen a bucket is full again

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// newLimiter returns a limiter for r, or nil (no limit) when r.PerMinute is
// zero.
func newLimiter(r RateLimit) *limiter {
	if r.PerMinute <= 0 {
		return nil
	}
	burst := max(r.Burst, 1)
	perSecond := float64(r.PerMinute) / 60
	return &limiter{
		limit:   rate.Limit(perSecond),
		burst:   burst,
		idle:    max(time.Minute, time.Duration(float64(burst)/perSecond*float64(time.Second))),
		buckets: map[string]*bucket{},
	}
}

// wait takes one request from key's bucket at now. It returns zero when the
// request may go on, or how long the client should wait before the next.
func (l *limiter) wait(key string, now time.Time) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > l.idle {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > l.idle {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[key] = b
	}
	b.seen = now
	if b.lim.AllowN(now, 1) {
		return 0
	}
	r := b.lim.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	r.CancelAt(now)
	return max(delay, time.Second)
}

// retryAfter is the Retry-After value, in whole seconds, for a wait.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10)
}

// clientKey names the client of r for the rate limits (clientaddr.Key,
// the rule the agent channel's limits use too).
func clientKey(r *http.Request, trusted []netip.Prefix) string { return clientaddr.Key(r, trusted) }
