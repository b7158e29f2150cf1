package main

import (
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

	"iam/models/dbtest/pgcluster"
)

func command(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }

// process is an iam subprocess whose output goes to a log file in work.
type process struct {
	cmd *exec.Cmd
	log *os.File
}

func startIAM(bin, work, sub string, env []string) (*process, error) {
	cmd := exec.Command(bin, sub)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(filepath.Join(work, sub+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start iam %s: %w", sub, err)
	}
	return &process{cmd: cmd, log: logf}, nil
}

func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
	p.log.Close()
}

func runIAM(bin string, env []string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHealthy waits for /healthz (not /readyz: the benchmark runs no
// Temporal server, which the agent channel does not need).
func waitHealthy(base string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the server at %s did not start", base)
}

// procStat returns a process's parent and CPU time (user and system) so
// far from /proc/<pid>/stat.
func procStat(pid int) (ppid int, cpu time.Duration, ok bool) {
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

func cpuTime(pid int) time.Duration {
	_, cpu, _ := procStat(pid)
	return cpu
}

// treeCPU is the CPU time of a process and its children (the PostgreSQL
// server and its backends).
func treeCPU(pid int) time.Duration {
	total := cpuTime(pid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, cpu, ok := procStat(child); ok && ppid == pid {
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
