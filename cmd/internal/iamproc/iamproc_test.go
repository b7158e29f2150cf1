package iamproc

import (
	"os"
	"testing"
	"time"
)

// TestParseStat: the fields are counted after the command name, whatever
// it holds, and the times are in ticks of 1/100 s.
func TestParseStat(t *testing.T) {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime ...
	text := "4242 (postgres: x) (y)) S 77 4242 4242 0 -1 4194560 10 0 0 0 150 50 300 100 20 0 1 0 100 0 0\n"
	st, ok := parseStat(text)
	if !ok {
		t.Fatal("not parsed")
	}
	if st.ppid != 77 || st.cpu != 2*time.Second || st.children != 4*time.Second {
		t.Errorf("got %+v, want ppid 77, cpu 2s, children 4s", st)
	}
	if _, ok := parseStat("4242 (short) S 1 2"); ok {
		t.Error("a truncated line parsed")
	}
}

// TestTreeCPU_CountsThisProcess: the tree of this process is at least its
// own CPU time.
func TestTreeCPU_CountsThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if own, tree := CPUTime(os.Getpid()), TreeCPU(os.Getpid()); tree < own {
		t.Errorf("TreeCPU %v < CPUTime %v", tree, own)
	}
}
