package benchrun

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// failAfter accepts n writes, then fails every one.
type failAfter struct {
	n   int
	buf bytes.Buffer
}

func (w *failAfter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return w.buf.Write(p)
}

// TestReport_KeepsTheFirstError: a report cut short says so at the end, and
// writes nothing after the failure.
func TestReport_KeepsTheFirstError(t *testing.T) {
	w := &failAfter{n: 1}
	r := NewReport(w)
	r.Printf("line %d\n", 1)
	if r.Err() != nil {
		t.Fatalf("after a written line: %v", r.Err())
	}
	r.Printf("line %d\n", 2)
	w.n = 5 // the writer would take more: the report must not resume
	r.Printf("line %d\n", 3)
	if _, err := fmt.Fprint(r, "line 4\n"); err == nil {
		t.Error("Write after the failure: no error")
	}
	if r.Err() == nil || r.Err().Error() != "disk full" {
		t.Errorf("Err = %v, want the first failure", r.Err())
	}
	if got := w.buf.String(); got != "line 1\n" {
		t.Errorf("written %q, want only the line before the failure", got)
	}
}

// TestCleanup_JoinsItsError: a failed cleanup reaches the function's
// result, beside the error it already had.
func TestCleanup_JoinsItsError(t *testing.T) {
	first, closing := errors.New("work failed"), errors.New("close failed")
	f := func(fail error) (err error) {
		defer Cleanup(&err, func() error { return closing })
		return fail
	}
	if err := f(nil); !errors.Is(err, closing) {
		t.Errorf("clean run: %v, want the close error", err)
	}
	if err := f(first); !errors.Is(err, first) || !errors.Is(err, closing) {
		t.Errorf("failed run: %v, want both errors", err)
	}
}

func TestPercentile(t *testing.T) {
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond // 1..100 ms, sorted
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0, time.Millisecond}, {50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}} {
		if got := Percentile(lat, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := Percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %v, want 0", got)
	}
	if got := Percentile(lat[:1], 99); got != time.Millisecond {
		t.Errorf("p99 of one = %v", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := slices.Clone(tc.xs)
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
		if !slices.Equal(in, tc.xs) {
			t.Errorf("Median reordered its argument: %v", tc.xs)
		}
	}
}
