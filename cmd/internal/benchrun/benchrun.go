// Package benchrun holds what the benchmark programs share besides running the
// binary (iamproc): their report writer, their deferred cleanups, whose
// failures end the run with an error instead of being lost, the machine's
// load and the generator's CPU time, and the percentiles and medians of
// their figures.
package benchrun

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Report writes a benchmark's report to w and keeps the first failed
// write: after it, writes do nothing, and Err returns it. A program returns
// Err at its end, so that a report cut short fails the run.
type Report struct {
	w   io.Writer
	err error
}

// NewReport writes to w.
func NewReport(w io.Writer) *Report { return &Report{w: w} }

// Printf writes a formatted line (or part of one).
func (r *Report) Printf(format string, args ...any) {
	if r.err == nil {
		_, r.err = fmt.Fprintf(r.w, format, args...)
	}
}

// Write makes Report an io.Writer (for a tabwriter over it).
func (r *Report) Write(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.w.Write(p)
	r.err = err
	return n, err
}

// Err is the first write's error, nil when every write succeeded.
func (r *Report) Err() error { return r.err }

// Cleanup runs fn (a Close, a Stop, a RemoveAll) and joins its error into
// *err: deferred with the function's named result, a failed cleanup fails
// the function.
func Cleanup(err *error, fn func() error) {
	*err = errors.Join(*err, fn())
}

// LoadAvg is the machine's load average over 1, 5 and 15 minutes as
// /proc/loadavg gives it ("?" where it cannot be read): the other load a
// figure was measured under.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// SelfCPU is the CPU time (user and system) this process used so far: the
// load generator's share of a machine it shares with the service.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Percentile is the p-th percentile (0–100) of sorted latencies, by the
// nearest rank below: the latency that p% of them do not exceed. Zero for
// no latencies.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Median is the median of xs (the mean of the middle two for an even
// count; zero for none). xs is left as it was.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
