package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// stats summarizes the operations of one load run.
type stats struct {
	ops      int
	errs     int
	firstErr error
	elapsed  time.Duration
	p50, p99 time.Duration
	lat      []time.Duration // every operation's, for merging runs
}

func (s stats) throughput() float64 { return float64(s.ops) / s.elapsed.Seconds() }

func (s stats) String() string {
	text := fmt.Sprintf("%8.1f req/s  p50 %7.2f ms  p99 %7.2f ms  (%d requests, %d errors, %s)",
		s.throughput(), ms(s.p50), ms(s.p99), s.ops, s.errs, s.elapsed.Round(time.Millisecond))
	if s.firstErr != nil {
		text += "; first error: " + s.firstErr.Error()
	}
	return text
}

// add merges the operations of another run of the same op into s.
func (s stats) add(o stats) stats {
	s.ops += o.ops
	s.errs += o.errs
	if s.firstErr == nil {
		s.firstErr = o.firstErr
	}
	s.elapsed += o.elapsed
	s.lat = append(s.lat, o.lat...)
	slices.Sort(s.lat)
	s.p50, s.p99 = 0, 0
	if n := len(s.lat); n > 0 {
		s.p50, s.p99 = s.lat[n/2], s.lat[min(n-1, n*99/100)]
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// op is one request of a worker; each worker keeps its own state (its
// cursor) in the value newState gave it.
type op func(ctx context.Context, state *string) error

// interleave runs each of fns from concurrency workers for d in all, in
// turns of d/turns (fns[0], fns[1], …, fns[0], …), and reports each one's
// operations. The machine is shared: turns make every fn see the same
// other load, so that their ratios hold. around, if not nil, wraps each
// turn of fns[i].
func interleave(ctx context.Context, turns, concurrency int, d time.Duration, around func(i, turn int, run func()), fns ...op) []stats {
	turns = max(turns, 1)
	all := make([]stats, len(fns))
	for turn := range turns {
		for i, fn := range fns {
			run := func() { all[i] = all[i].add(load(ctx, concurrency, d/time.Duration(turns), fn)) }
			if around != nil {
				around(i, turn, run)
			} else {
				run()
			}
		}
	}
	return all
}

// load runs op from concurrency workers for d and reports the latencies.
// Workers start no operation after d and finish the ones under way rather
// than cancel them (a cancelled statement costs its connection), and the
// run lasts until the last one ends.
func load(ctx context.Context, concurrency int, d time.Duration, fn op) stats {
	var mu sync.Mutex
	var all []time.Duration
	errs := 0
	var firstErr0 error
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			var firstErr error
			state := ""
			for ctx.Err() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				err := fn(ctx, &state)
				if ctx.Err() != nil {
					break
				}
				if err != nil {
					if bad == 0 {
						firstErr = err
					}
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			errs += bad
			if firstErr != nil && firstErr0 == nil {
				firstErr0 = firstErr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return stats{errs: errs, firstErr: firstErr0, elapsed: time.Since(start)}.add(stats{ops: len(all), lat: all})
}
