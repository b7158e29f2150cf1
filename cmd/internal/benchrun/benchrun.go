// Package benchrun holds what the benchmark programs share besides running the
// binary (iamproc): their report writer and their deferred cleanups, whose
// failures end the run with an error instead of being lost.
package benchrun

import (
	"errors"
	"fmt"
	"io"
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
