//go:build !unix

package pgcluster

import (
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// osUser is a system user the server programs run as; never used here.
type osUser struct {
	name     string
	uid, gid int
}

func serverUser() (*osUser, error) { return nil, nil }

func procAttr(*osUser, bool) *syscall.SysProcAttr { return nil }

func killServer(pid int) {
	_ = exec.Command("taskkill", "/F", "/T", "/PID", strconv.Itoa(pid)).Run()
}

// watchdog: on this system the cluster is stopped by Main only.
type watchdog struct{}

func startWatchdog(*Cluster) (*watchdog, error) { return nil, nil }

func (*watchdog) release(time.Duration) error { return nil }
