package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"iam/cmd/internal/iamproc"
	"iam/models/dbtest/pgcluster"
)

// treeCPU is the CPU time of a process and its children (the PostgreSQL
// server and its backends).
func treeCPU(pid int) time.Duration {
	total := iamproc.CPUTime(pid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, cpu, ok := iamproc.Stat(child); ok && ppid == pid {
			total += cpu
		}
	}
	return total
}

func postmasterPID(pg *pgcluster.Cluster) int { return pg.PID() }

// selfCPU is the CPU time this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadAvg() string {
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
