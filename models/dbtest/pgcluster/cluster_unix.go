//go:build unix

package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// osUser is a system user the server programs run as.
type osUser struct {
	name     string
	uid, gid int
}

// serverUser returns the user to run the server as: nil (this process's
// user) unless this process runs as root, which initdb and pg_ctl refuse; then
// the "postgres" system user.
func serverUser() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("the tests run as root, which PostgreSQL refuses, and there is no \"postgres\" system user to run it as: %w", err)
	}
	// 32 bits, as the kernel's ids: procAttr converts them to uint32.
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("system user postgres has uid %q and gid %q, not 32-bit numbers", u.Uid, u.Gid)
	}
	return &osUser{name: u.Username, uid: int(uid), gid: int(gid)}, nil
}

// procAttr runs a program as owner (when not nil) and, with ownGroup, in a
// process group of its own, out of reach of signals sent to the test's group.
func procAttr(owner *osUser, ownGroup bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: ownGroup}
	if owner != nil {
		attr.Credential = &syscall.Credential{Uid: uint32(owner.uid), Gid: uint32(owner.gid)} //nolint:gosec // G115: serverUser parsed both as 32-bit numbers
	}
	return attr
}

// killServer kills the server. Its backends, each the leader of a process
// group of its own, notice the loss of the postmaster and exit by themselves.
func killServer(pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// watchdogScript waits until its standard input, a pipe whose only writer is
// the test process, reaches end of file: when the test process closes it or
// dies in any way. Then it stops the server and removes the cluster's folder.
// Arguments: pg_ctl, data folder, cluster folder.
const watchdogScript = `read -r line
if [ -f "$2/postmaster.pid" ]; then
	pid=$(head -n 1 "$2/postmaster.pid")
	"$1" -D "$2" -m immediate -w -t 30 stop >/dev/null 2>&1 || kill -KILL "$pid" 2>/dev/null
fi
rm -rf "$3"
`

// watchdog is a small process that stops the cluster when the test process
// ends without doing so itself (panic, timeout, kill).
type watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File // write end; closing it (or dying) wakes the watchdog
	done chan error
}

func startWatchdog(c *Cluster) (*watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "iam-pg-watchdog", //nolint:gosec // G204: the fixed script, given the installed pg_ctl and the cluster's folders
		filepath.Join(c.bin.dir, "pg_ctl"), c.data, c.dir)
	cmd.Stdin = r
	cmd.Dir = "/"
	cmd.Env = c.env
	cmd.SysProcAttr = procAttr(c.owner, true)
	err = cmd.Start()
	// The child has its own copy of the read end; this one was never read,
	// so a failed close loses nothing.
	_ = r.Close()
	if err != nil {
		return nil, errors.Join(err, w.Close())
	}
	wd := &watchdog{cmd: cmd, pipe: w, done: make(chan error, 1)}
	go func() { wd.done <- cmd.Wait() }()
	return wd, nil
}

// release tells the watchdog to finish and waits for it.
func (wd *watchdog) release(timeout time.Duration) error {
	closeErr := wd.pipe.Close()
	select {
	case err := <-wd.done:
		if err = errors.Join(closeErr, err); err != nil {
			return fmt.Errorf("cluster watchdog: %w", err)
		}
		return nil
	case <-time.After(timeout):
		_ = wd.cmd.Process.Kill()
		return errors.Join(closeErr, fmt.Errorf("cluster watchdog did not finish within %v", timeout))
	}
}
