package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseMix(t *testing.T) {
	m, err := parseMix("20, 30,20,20,10")
	if err != nil {
		t.Fatal(err)
	}
	if m != (mix{20, 30, 20, 20, 10}) {
		t.Errorf("got %v", m)
	}
	for _, bad := range []string{"20,30,20,20", "20,30,20,20,20", "20,30,x,20,10", "-10,60,20,20,10"} {
		if _, err := parseMix(bad); err == nil {
			t.Errorf("parseMix(%q): no error", bad)
		}
	}
}

// TestMix_Pick: every roll of [0, 100) falls on a step, in the shares the
// mix gives; a step of 0% is never picked.
func TestMix_Pick(t *testing.T) {
	m := mix{20, 30, 0, 40, 10}
	var got [numOps]int
	for roll := range 100 {
		got[m.pick(roll)]++
	}
	if got != [numOps]int(m) {
		t.Errorf("shares %v, want %v", got, m)
	}
	if m.pick(0) != opCreate || m.pick(20) != opPatch || m.pick(50) != opMember || m.pick(99) != opDelete {
		t.Error("steps out of order")
	}
}

func testResult(perSecond float64, p99 time.Duration) *result {
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Millisecond
	}
	lat[99] = p99
	return &result{requests: int(perSecond * 10), elapsed: 10 * time.Second, lat: lat,
		serveCPU: time.Duration(perSecond*10) * 500 * time.Microsecond}
}

// TestTurn_Ratios: after over before; the p99 of 100 requests is the 99th
// smallest (nearest rank below).
func TestTurn_Ratios(t *testing.T) {
	tr := turn{before: testResult(1000, 10*time.Millisecond), after: testResult(900, 10*time.Millisecond)}
	tr.before.lat[98], tr.after.lat[98] = 10*time.Millisecond, 12*time.Millisecond
	if got := tr.throughput(); got < 0.8999 || got > 0.9001 {
		t.Errorf("throughput ratio %v, want 0.9", got)
	}
	if got := tr.p99(); got < 1.1999 || got > 1.2001 {
		t.Errorf("p99 ratio %v, want 1.2", got)
	}
	if f := tr.before.figures(); f.serveCPU != 500 || f.perSecond != 1000 {
		t.Errorf("figures %+v, want 1000/s at 500 µs per request", f)
	}
}

func TestMedianFigures(t *testing.T) {
	got := medianFigures([]figures{{perSecond: 3, p99: 9}, {perSecond: 1, p99: 7}, {perSecond: 2, p99: 8}})
	if got.perSecond != 2 || got.p99 != 8 {
		t.Errorf("got %+v, want each column's median", got)
	}
}

// TestNewResult: the requests of every kind make the run's latencies,
// sorted.
func TestNewResult(t *testing.T) {
	var smp sample
	smp.lat[reqCreate] = []time.Duration{3, 1}
	smp.lat[reqList] = []time.Duration{2}
	r := newResult("after", &smp, time.Second)
	if r.requests != 3 || r.lat[0] != 1 || r.lat[2] != 3 || r.kinds[reqCreate][0] != 1 {
		t.Errorf("got %+v", r)
	}
}

// TestParallel: every index runs once; the first error stops the rest.
func TestParallel(t *testing.T) {
	var seen [100]atomic.Int32
	if err := parallel(context.Background(), 100, 8, func(_ context.Context, i int) error {
		seen[i].Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Fatalf("index %d ran %d times", i, n)
		}
	}
	boom := errors.New("boom")
	var ran atomic.Int32
	err := parallel(context.Background(), 1000, 1, func(_ context.Context, i int) error {
		ran.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || ran.Load() != 4 {
		t.Errorf("err %v after %d runs, want boom after 4", err, ran.Load())
	}
}
