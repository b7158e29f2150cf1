package sqldb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"time"

	"github.com/uptrace/bun"
)

// Node leases (table id_nodes, one row per node ever leased):
//
//   - a process takes a node whose lease expired (or was never taken) and
//     holds it for IDLeaseTTL, renewing it every third of that; expiry is
//     reckoned on the database's clock, so the processes' clocks need not
//     agree;
//   - each renewal also records id_ms_bound, a millisecond no id of the
//     holder will pass; the next holder of the node starts its ids after it,
//     so that even a holder whose clock ran ahead cannot have made the ids
//     the next one makes;
//   - the holder makes ids only until IDLeaseTTL minus idLeaseMargin after
//     the start of its last successful renewal (its own monotonic clock),
//     and never past id_ms_bound. When renewals fail that long (the database
//     is unreachable), NewID waits for one, up to idWait, and then panics
//     rather than risk a collision. A lease found taken over is given up and
//     a new node leased.

// IDLeaseTTL is how long a node lease lasts without renewal.
const IDLeaseTTL = 30 * time.Second

// IDLease is a process's lease of its id node. Release it at shutdown.
type IDLease struct {
	db     *bun.DB
	gen    *idGenerator
	holder string
	ttl    time.Duration
	log    *slog.Logger

	mu   sync.Mutex
	node int64
	stop chan struct{}
	done chan struct{}
}

// LeaseIDNode leases a node for this process's ids (NewID) and keeps it
// renewed until Release. It fails when every node is leased or the database
// does not answer.
func LeaseIDNode(ctx context.Context, db *bun.DB, log *slog.Logger) (*IDLease, error) {
	return leaseNode(ctx, db, ids, IDLeaseTTL, log)
}

func leaseNode(ctx context.Context, db *bun.DB, gen *idGenerator, ttl time.Duration, log *slog.Logger) (*IDLease, error) {
	if log == nil {
		log = slog.Default()
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	l := &IDLease{db: db, gen: gen, holder: hex.EncodeToString(b[:]), ttl: ttl, log: log,
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	go l.keep() //nolint:gosec // the lease is kept for the process, beyond the context that acquired it; Release stops it
	return l, nil
}

// Node is the leased node.
func (l *IDLease) Node() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.node
}

// margin is how long before the lease's expiry the holder stops making ids.
func (l *IDLease) margin() time.Duration { return l.ttl / 6 }

// dbMillis is the database's clock in Unix milliseconds, as SQL.
func dbMillis(db bun.IDB) string {
	return DialectOf(db).clockMillis()
}

// acquire leases a free node and points the generator at it.
func (l *IDLease) acquire(ctx context.Context) error {
	for attempt := 0; attempt < 100; attempt++ {
		var taken []int64
		err := l.db.NewSelect().Table("id_nodes").Column("node").
			Where("expires_ms >= "+dbMillis(l.db)).Scan(ctx, &taken)
		if err != nil {
			return fmt.Errorf("lease an id node: %w", err)
		}
		busy := make(map[int64]bool, len(taken))
		for _, n := range taken {
			busy[n] = true
		}
		free := make([]int64, 0, NodeCount-len(taken))
		for n := int64(0); n < NodeCount; n++ {
			if !busy[n] {
				free = append(free, n)
			}
		}
		if len(free) == 0 {
			return fmt.Errorf("lease an id node: all %d nodes are leased by live processes", NodeCount)
		}
		pick, _ := rand.Int(rand.Reader, big.NewInt(int64(len(free))))
		node := free[pick.Int64()]
		ok, err := l.claim(ctx, node)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		// Another process took it meanwhile: look again.
	}
	return errors.New("lease an id node: every node tried was taken by another process meanwhile")
}

// idNode is a row of id_nodes.
type idNode struct {
	bun.BaseModel `bun:"table:id_nodes"`

	Node      int64  `bun:"node,pk"`
	Holder    string `bun:"holder"`
	ExpiresMs int64  `bun:"expires_ms"`
	IDMsBound int64  `bun:"id_ms_bound"`
}

// claim takes node when its lease expired or it was never leased, and then
// points the generator at it. It reports false when the node is taken.
func (l *IDLease) claim(ctx context.Context, node int64) (bool, error) {
	start := time.Now()
	bound := millisNow() + l.ttl.Milliseconds()
	var floor int64
	claimed := false
	err := InTx(ctx, l.db, func(ctx context.Context, tx bun.Tx) error {
		var now int64
		if err := tx.NewRaw("SELECT "+dbMillis(tx)).Scan(ctx, &now); err != nil {
			return fmt.Errorf("read the database clock: %w", err)
		}
		var rows []idNode
		q := DialectOf(tx).LockRows(tx.NewSelect().Model(&rows).Where("node = ?", node), "UPDATE")
		if err := q.Scan(ctx); err != nil {
			return fmt.Errorf("read id node %d: %w", node, err)
		}
		row := idNode{Node: node, Holder: l.holder, ExpiresMs: now + l.ttl.Milliseconds(), IDMsBound: bound}
		if len(rows) == 1 {
			if rows[0].ExpiresMs >= now {
				return nil // leased by a live process
			}
			floor = rows[0].IDMsBound
			row.IDMsBound = max(bound, floor)
			if _, err := tx.NewUpdate().Model(&row).WherePK().Exec(ctx); err != nil {
				return fmt.Errorf("take over id node %d: %w", node, err)
			}
		} else if _, err := tx.NewInsert().Model(&row).Exec(ctx); err != nil {
			return fmt.Errorf("lease id node %d: %w", node, err)
		}
		claimed = true
		return nil
	})
	if err != nil {
		if IsUniqueViolation(err) {
			return false, nil // another process inserted it first
		}
		return false, err
	}
	if !claimed {
		return false, nil
	}
	l.mu.Lock()
	l.node = node
	l.mu.Unlock()
	g := l.gen
	g.mu.Lock()
	defer g.mu.Unlock()
	g.node = node
	// The next id's millisecond is after every id the node's previous
	// holders could have made (seq 0xfff makes the next id borrow
	// the following millisecond).
	g.last, g.seq = max(g.last, floor), 0xfff
	g.leased, g.lost, g.owner = true, nil, l
	g.deadline = start.Add(l.ttl - l.margin())
	g.maxMillis = max(bound, floor)
	return true, nil
}

// renew extends the lease. It reports false when the lease was taken over
// (it expired and another process claimed the node).
func (l *IDLease) renew(ctx context.Context) (bool, error) {
	start := time.Now()
	bound := millisNow() + l.ttl.Milliseconds()
	node := l.Node()
	res, err := l.db.NewUpdate().Table("id_nodes").
		Set("expires_ms = "+dbMillis(l.db)+" + ?", l.ttl.Milliseconds()).
		Set("id_ms_bound = CASE WHEN id_ms_bound > ? THEN id_ms_bound ELSE ? END", bound, bound).
		Where("node = ? AND holder = ?", node, l.holder).
		Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("renew id node %d: %w", node, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	g := l.gen
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.owner == l && g.node == node && g.lost == nil {
		g.deadline = start.Add(l.ttl - l.margin())
		g.maxMillis = max(g.maxMillis, bound)
	}
	return true, nil
}

// keep renews the lease every third of its life until Release; a failed
// renewal is retried every second. A lease taken over is replaced by a new
// one.
func (l *IDLease) keep() {
	defer close(l.done)
	every := l.ttl / 3
	wait := every
	for {
		select {
		case <-l.stop:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
		ok, err := l.renew(ctx)
		if err == nil && !ok {
			l.gen.mu.Lock()
			if l.gen.owner == l {
				l.gen.lost = fmt.Errorf("the lease of id node %d was taken over: %w", l.Node(), errLeaseStale)
			}
			l.gen.mu.Unlock()
			l.log.Error("id node lease lost (not renewed in time): leasing another", "node", l.Node())
			err = l.acquire(ctx)
			if err == nil {
				l.log.Info("id node leased", "node", l.Node())
			}
		}
		cancel()
		wait = every
		if err != nil {
			l.log.Warn("id node lease not renewed; retrying", "node", l.Node(), "error", err)
			wait = min(time.Second, every)
		}
	}
}

// Release stops making ids with the node and gives the node up, recording
// the last millisecond used, so that another process may take it at once.
// The generator then makes ids as without a lease.
func (l *IDLease) Release(ctx context.Context) error {
	select {
	case <-l.stop:
		return nil
	default:
		close(l.stop)
	}
	<-l.done
	g := l.gen
	g.mu.Lock()
	last := g.last
	if g.owner == l {
		// Back to ids without a lease (a random node): Release comes at
		// shutdown, once nothing makes ids, or in tools and tests that
		// opened the store more than once.
		g.leased, g.lost, g.owner = false, nil, nil
		g.node, g.seq = randomNode(), 0xfff // the next id in the next millisecond
	}
	g.mu.Unlock()
	_, err := l.db.NewUpdate().Table("id_nodes").
		Set("expires_ms = 0").
		Set("id_ms_bound = ?", last).
		Where("node = ? AND holder = ?", l.Node(), l.holder).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("release id node %d: %w", l.Node(), err)
	}
	return nil
}
