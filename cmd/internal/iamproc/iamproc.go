// Package iamproc runs the iam binary as processes for the benchmark
// programs: it builds the binary, starts a subcommand with its output in a
// log file, runs one to its end, finds a free port, waits for a probe, and
// reads a process's CPU time from /proc.
package iamproc

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Build builds ./cmd/iam (run from the module's root) into work/name with
// the build tags given, linked as deploy/Dockerfile links it ("nodev" for
// the production build), and prints its size.
func Build(work, name, tags string) (string, error) {
	bin := filepath.Join(work, name)
	fmt.Printf("building %s (go build -tags %q) ...\n", name, tags)
	//nolint:gosec // the go tool, building ./cmd/iam with the benchmark's tags into its work directory
	if out, err := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", tags, "-o", bin, "./cmd/iam").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	if fi, err := os.Stat(bin); err == nil {
		fmt.Printf("  %s: %.1f MB\n", name, float64(fi.Size())/1e6)
	}
	return bin, nil
}

// Process is an iam subprocess whose output goes to a log file.
type Process struct {
	cmd *exec.Cmd
	log *os.File
}

// Start runs `bin sub` with the benchmark's environment and env on top, its
// output in work/<sub>-*.log. The process dies with the benchmark.
func Start(bin, work, sub string, env []string) (*Process, error) {
	cmd := exec.Command(bin, sub) //nolint:gosec // the binary Build made, with the benchmark's subcommand
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.CreateTemp(work, sub+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("start iam %s: %w", sub, err), logf.Close())
	}
	return &Process{cmd: cmd, log: logf}, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop stops the process gracefully and waits for it.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
	// Only the process wrote to the log, through its own descriptor: a
	// failed close of ours loses nothing.
	_ = p.log.Close()
}

// Run runs `bin args...` to its end and returns its combined output.
func Run(bin string, env []string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...) //nolint:gosec // the binary Build made, with the benchmark's arguments
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// FreePort is a port free on 127.0.0.1 a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil { // the port stays taken
		return 0, err
	}
	return port, nil
}

// WaitFor polls url until it answers 200, for at most timeout.
func WaitFor(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil { //nolint:gosec // the probe address of a process the benchmark started
			_ = resp.Body.Close() // only the status is wanted: nothing to lose
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer 200 within %v", url, timeout)
}

// Stat returns a process's parent and the CPU time (user and system) it has
// used so far, from /proc/<pid>/stat.
func Stat(pid int) (ppid int, cpu time.Duration, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return ppid, time.Duration(utime+stime) * time.Second / 100, true // USER_HZ
}

// CPUTime is the CPU time (user and system) a process has used so far.
func CPUTime(pid int) time.Duration {
	_, cpu, _ := Stat(pid)
	return cpu
}
