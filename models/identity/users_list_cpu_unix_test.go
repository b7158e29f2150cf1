//go:build unix

package identity_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used, user and system: what
// a page costs the service, without the database server's share.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
