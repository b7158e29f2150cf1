package benchrun

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
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
