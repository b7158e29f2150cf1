// Package iamproc runs the iam binary as processes for the benchmark
// programs: it builds the binary (from the working tree or from an earlier
// commit), starts a subcommand with its output in a log file, runs one to
// its end, gets an access token from it, finds a free port, waits for a
// probe, and reads a process's CPU time from /proc.
package iamproc

import (
	"encoding/json"
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
func Build(work, name, tags string) (string, error) { return BuildIn(".", work, name, tags) }

// BuildIn is Build of the module whose root is src (a worktree of another
// commit, say).
func BuildIn(src, work, name, tags string) (string, error) {
	bin, err := filepath.Abs(filepath.Join(work, name))
	if err != nil {
		return "", err
	}
	fmt.Printf("building %s (go build -tags %q in %s) ...\n", name, tags, src)
	//nolint:gosec // the go tool, building ./cmd/iam with the benchmark's tags into its work directory
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", tags, "-o", bin, "./cmd/iam")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build in %s: %w\n%s", src, err, out)
	}
	if fi, err := os.Stat(bin); err == nil {
		fmt.Printf("  %s: %.1f MB\n", name, float64(fi.Size())/1e6)
	}
	return bin, nil
}

// BuildRevision is Build of the commit rev of the repository the working
// directory is in: it checks rev out into a temporary git worktree under
// work, builds there, and removes the worktree (the binary stays in work).
func BuildRevision(rev, work, name, tags string) (_ string, err error) {
	tree := filepath.Join(work, "worktree-"+name)
	//nolint:gosec // git, checking out the commit the benchmark was asked to build
	if out, addErr := exec.Command("git", "worktree", "add", "--detach", tree, rev).CombinedOutput(); addErr != nil {
		return "", fmt.Errorf("git worktree add %s: %w\n%s", rev, addErr, out)
	}
	defer func() {
		//nolint:gosec // git, removing the worktree made above
		if out, rmErr := exec.Command("git", "worktree", "remove", "--force", tree).CombinedOutput(); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("git worktree remove %s: %w\n%s", tree, rmErr, out))
		}
	}()
	return BuildIn(tree, work, name, tags)
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

// Token runs `bin token --user user --scopes scopes` and returns the
// access token it prints.
func Token(bin string, env []string, user string, scopes ...string) (string, error) {
	out, err := Run(bin, env, "token", "--user", user, "--scopes", strings.Join(scopes, ","))
	if err != nil {
		return "", fmt.Errorf("iam token: %w\n%s", err, out)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	// The token is the JSON object of the output (a line may come before it).
	if i, j := strings.Index(out, "{"), strings.LastIndex(out, "}"); i >= 0 && j > i {
		_ = json.Unmarshal([]byte(out[i:j+1]), &tok)
	}
	if tok.AccessToken == "" {
		return "", fmt.Errorf("iam token printed %q", out)
	}
	return tok.AccessToken, nil
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

// WaitFor polls url every 200 ms until it answers 200, for at most
// timeout.
func WaitFor(url string, timeout time.Duration) error {
	return WaitForEvery(url, timeout, 200*time.Millisecond)
}

// WaitForEvery is WaitFor polling every every.
func WaitForEvery(url string, timeout, every time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil { //nolint:gosec // the probe address of a process the benchmark started
			_ = resp.Body.Close() // only the status is wanted: nothing to lose
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(every)
	}
	return fmt.Errorf("%s did not answer 200 within %v", url, timeout)
}

// Stat returns a process's parent and the CPU time (user and system) it has
// used so far, from /proc/<pid>/stat.
func Stat(pid int) (ppid int, cpu time.Duration, ok bool) {
	st, ok := readStat(pid)
	return st.ppid, st.cpu, ok
}

// procStat is what the benchmarks read of /proc/<pid>/stat.
type procStat struct {
	ppid int
	// cpu is the process's own CPU time, children the CPU time of its
	// children that ended and were waited for.
	cpu, children time.Duration
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	return parseStat(string(b))
}

// parseStat reads the text of /proc/<pid>/stat.
func parseStat(text string) (procStat, bool) {
	// The fields after the command name, which is in parentheses (and may
	// hold spaces and parentheses itself).
	f := strings.Fields(text[strings.LastIndexByte(text, ')')+1:])
	if len(f) < 15 {
		return procStat{}, false
	}
	ticks := func(i int) time.Duration {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(n) * time.Second / 100 // USER_HZ
	}
	ppid, _ := strconv.Atoi(f[1])
	return procStat{ppid: ppid, cpu: ticks(11) + ticks(12), children: ticks(13) + ticks(14)}, true
}

// TreeCPU is the CPU time of a process and its children, those running and
// those that ended and were waited for: the PostgreSQL server's, with every
// backend's.
func TreeCPU(pid int) time.Duration {
	root, _ := readStat(pid)
	total := root.cpu + root.children
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(child); ok && st.ppid == pid {
			total += st.cpu
		}
	}
	return total
}

// CPUTime is the CPU time (user and system) a process has used so far.
func CPUTime(pid int) time.Duration {
	_, cpu, _ := Stat(pid)
	return cpu
}
