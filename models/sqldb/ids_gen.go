package sqldb

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"iam/models"
	"sync"
	"time"
)

// Ids are 63-bit snowflakes made before insert, so that a row (a job, say)
// has its id before anything else refers to it: 41 bits of milliseconds since
// idEpoch, 10 bits of node and 12 bits of sequence. Within a process ids are
// strictly increasing.
//
// The node is what keeps the processes' ids apart. A process that makes ids
// (serve, worker, dev, token) leases its node from the database at start
// (LeaseIDNode, ids_lease.go): no two live processes hold the same node, and
// a node is taken over only after its lease expired, its ids starting after
// the last millisecond the previous holder could have used. Without a lease
// (tests, tools that write nothing) the node is drawn at random.
var idEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

type idGenerator struct {
	mu   sync.Mutex
	node int64
	last int64 // last millisecond used
	seq  int64

	// With a lease: ids are made only before deadline (on the monotonic
	// clock) and with a millisecond of at most maxMillis; lost is set when
	// the lease is gone for good. The lease's renewal moves both forward.
	leased    bool
	deadline  time.Time
	maxMillis int64
	lost      error
	owner     *IDLease // the lease the generator follows
}

var ids = newIDGenerator()

func newIDGenerator() *idGenerator { return &idGenerator{node: randomNode()} }

func randomNode() int64 {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint16(b[:]) & (NodeCount - 1))
}

// millisNow is the current millisecond since idEpoch.
func millisNow() int64 { return time.Since(idEpoch).Milliseconds() }

// tryNext makes the next id, or reports why it may not now.
func (g *idGenerator) tryNext() (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lost != nil {
		return 0, g.lost
	}
	now := millisNow()
	if now < g.last { // the clock went back: keep counting from the last one
		now = g.last
	}
	seq := int64(0)
	if now == g.last {
		seq = (g.seq + 1) & 0xfff
		if seq == 0 { // 4096 ids in one millisecond: borrow the next one
			now++
		}
	}
	if g.leased && (now > g.maxMillis || !time.Now().Before(g.deadline)) {
		return 0, errLeaseStale
	}
	g.last, g.seq = now, seq
	return now<<22 | g.node<<12 | g.seq, nil
}

var errLeaseStale = errors.New("the id node lease is not renewed")

// next returns the next id. While the lease is stale (not renewed in time) it
// waits for a renewal up to idWait, then panics with an EUNAVAILABLE *Error
// (the database has been out of reach for longer than a lease): an id that
// could collide with another process's must never be made. The API answers
// that panic like any outage (503 with Retry-After); an activity fails and is
// retried.
func (g *idGenerator) next() int64 {
	id, err := g.tryNext()
	if err == nil {
		return id
	}
	give := time.Now().Add(idWait)
	for errors.Is(err, errLeaseStale) && time.Now().Before(give) {
		time.Sleep(5 * time.Millisecond)
		if id, err = g.tryNext(); err == nil {
			return id
		}
	}
	panic(&models.Error{Code: models.EUNAVAILABLE, Title: "Service Unavailable", Detail: fmt.Sprintf("no id can be made safely now: %v", err)})
}

// NewID returns a fresh id.
func NewID() int64 { return ids.next() }

// NodeCount is how many nodes there are: how many processes may make ids at
// once.
const NodeCount = 1 << 10

// idWait bounds how long NewID waits for a lease renewal before it gives up.
const idWait = 10 * time.Second
