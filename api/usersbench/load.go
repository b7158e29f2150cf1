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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// op is one request of a worker; each worker keeps its own state (its
// cursor) in the value newState gave it.
type op func(ctx context.Context, state *string) error

// load runs op from concurrency workers for d and reports the latencies.
func load(ctx context.Context, concurrency int, d time.Duration, fn op) stats {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var all []time.Duration
	errs := 0
	var firstErr0 error
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			var firstErr error
			state := ""
			for ctx.Err() == nil {
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
	s := stats{ops: len(all), errs: errs, firstErr: firstErr0, elapsed: time.Since(start)}
	if len(all) > 0 {
		slices.Sort(all)
		s.p50 = all[len(all)/2]
		s.p99 = all[min(len(all)-1, len(all)*99/100)]
	}
	return s
}
