package sqldb_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/sqldb"
)

// TestIDLease_ManyProcessesAtOnce: 64 generators (standing for 64
// processes) lease nodes at the same time and get 64 distinct nodes; then
// all make ids at once, many in the same milliseconds, and no two ids are
// equal.
func TestIDLease_ManyProcessesAtOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		const procs, each = 64, 2000
		gens := make([]*sqldb.IDGen, procs)
		leases := make([]*sqldb.IDLease, procs)
		var wg sync.WaitGroup
		errs := make(chan error, procs)
		for i := range procs {
			gens[i] = sqldb.NewIDGen()
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := sqldb.LeaseNodeFor(ctx, db, gens[i], 30*time.Second)
				if err != nil {
					errs <- err
					return
				}
				leases[i] = l
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, l := range leases {
				_ = l.Release(context.Background())
			}
		})
		nodes := map[int64]bool{}
		for _, l := range leases {
			if nodes[l.Node()] {
				t.Fatalf("node %d leased twice", l.Node())
			}
			nodes[l.Node()] = true
		}

		out := make([][]int64, procs)
		start := make(chan struct{})
		for i := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range each {
					id, err := gens[i].TryNext()
					if err != nil {
						t.Error(err)
						return
					}
					out[i] = append(out[i], id)
				}
			}()
		}
		close(start)
		wg.Wait()
		seen := make(map[int64]bool, procs*each)
		perMillis := map[int64]map[int64]bool{} // millisecond -> nodes that used it
		for i, list := range out {
			for _, id := range list {
				if seen[id] {
					t.Fatalf("id %d made twice", id)
				}
				seen[id] = true
				if sqldb.IDNode(id) != leases[i].Node() {
					t.Fatalf("id %d has node %d, want the leased %d", id, sqldb.IDNode(id), leases[i].Node())
				}
				ms := sqldb.IDMillis(id)
				if perMillis[ms] == nil {
					perMillis[ms] = map[int64]bool{}
				}
				perMillis[ms][sqldb.IDNode(id)] = true
			}
		}
		shared := 0
		for _, n := range perMillis {
			if len(n) > 1 {
				shared++
			}
		}
		if shared == 0 {
			t.Error("no millisecond was used by two generators: the test does not test collisions")
		}
	})
}

// TestIDLease_RenewalTakeoverAndRelease: a renewed lease keeps making ids
// past its first expiry; a lease left unrenewed stops making ids before it
// expires, cannot be taken over until it expired, and then is; the new
// holder's ids come after every id of the old one. A released node is free
// at once.
func TestIDLease_RenewalTakeoverAndRelease(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		const ttl = 600 * time.Millisecond
		release := func(l *sqldb.IDLease) {
			if rerr := l.Release(ctx); rerr != nil {
				t.Errorf("releasing node %d: %v", l.Node(), rerr)
			}
		}

		renewed := sqldb.NewIDGen()
		lr, err := sqldb.LeaseNodeFor(ctx, db, renewed, ttl)
		if err != nil {
			t.Fatal(err)
		}
		defer release(lr)
		for end := time.Now().Add(3 * ttl); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if _, err = renewed.TryNext(); err != nil {
				t.Fatalf("a renewed lease stopped making ids: %v", err)
			}
		}

		old := sqldb.NewIDGen()
		la, err := sqldb.LeaseNodeFor(ctx, db, old, ttl)
		if err != nil {
			t.Fatal(err)
		}
		la.StopRenewing()
		taken := time.Now()
		var last int64
		for {
			id, tryErr := old.TryNext()
			if tryErr != nil {
				break
			}
			last = id
			if time.Since(taken) > ttl {
				t.Fatal("an unrenewed lease still makes ids after its life")
			}
		}
		if time.Since(taken) > ttl {
			t.Fatalf("the unrenewed lease stopped after %v, not before it expired (%v)", time.Since(taken), ttl)
		}

		newer := sqldb.NewIDGen()
		lb, err := sqldb.LeaseNodeFor(ctx, db, newer, ttl)
		if err != nil {
			t.Fatal(err)
		}
		defer release(lb)
		if lb.Node() == la.Node() {
			t.Fatalf("a live lease's node %d was leased again", la.Node())
		}
		if ok, claimErr := lb.Claim(ctx, la.Node()); claimErr != nil || ok {
			t.Fatalf("claiming a node whose lease has not expired: %v %v", ok, claimErr)
		}
		time.Sleep(time.Until(taken.Add(ttl + 100*time.Millisecond)))
		if ok, claimErr := lb.Claim(ctx, la.Node()); claimErr != nil || !ok {
			t.Fatalf("taking over an expired node: %v %v", ok, claimErr)
		}
		first, err := newer.TryNext()
		if err != nil {
			t.Fatal(err)
		}
		if sqldb.IDNode(first) != la.Node() || first <= last || sqldb.IDMillis(first) <= sqldb.IDMillis(last) {
			t.Errorf("after the takeover: id %d (node %d, ms %d), the old holder's last %d (ms %d)",
				first, sqldb.IDNode(first), sqldb.IDMillis(first), last, sqldb.IDMillis(last))
		}
		if _, err = old.TryNext(); err == nil {
			t.Error("the old holder makes ids again")
		}

		// Release frees the node at once.
		rel := sqldb.NewIDGen()
		lc, err := sqldb.LeaseNodeFor(ctx, db, rel, ttl)
		if err != nil {
			t.Fatal(err)
		}
		relLast, _ := rel.TryNext()
		if err = lc.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if id, tryErr := rel.TryNext(); tryErr != nil || id <= relLast {
			t.Errorf("a released generator makes ids as without a lease: %d %v", id, tryErr)
		}
		next := sqldb.NewIDGen()
		ld, err := sqldb.LeaseNodeFor(ctx, db, next, ttl)
		if err != nil {
			t.Fatal(err)
		}
		defer release(ld)
		if ok, err := ld.Claim(ctx, lc.Node()); err != nil || !ok {
			t.Fatalf("claiming a released node: %v %v", ok, err)
		}
		if id, _ := next.TryNext(); id <= relLast {
			t.Errorf("after a release the next holder's id %d is not after %d", id, relLast)
		}
	})
}

// BenchmarkIDGen_Leased: making an id under a lease (the lease checks are
// two clock readings under the generator's one mutex).
func BenchmarkIDGen_Leased(b *testing.B) {
	db := dbtest.SQLite(b)
	gen := sqldb.NewIDGen()
	l, err := sqldb.LeaseNodeFor(context.Background(), db, gen, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := l.Release(context.Background()); err != nil {
			b.Error(err)
		}
	}()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := gen.TryNext(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkNewID: the process's generator without a lease, for comparison.
func BenchmarkNewID(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			sqldb.NewID()
		}
	})
}
