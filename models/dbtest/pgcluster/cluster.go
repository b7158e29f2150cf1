// Package pgcluster runs throwaway PostgreSQL clusters from the installed
// server binaries, for tests and benchmark programs.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ErrNoServer means there are no PostgreSQL server binaries at all. Tests
// skip their PostgreSQL runs on it; anything else is a failure.
var ErrNoServer = errors.New("no PostgreSQL server available")

// TestConfig is appended to a test cluster's postgresql.conf: reachable on
// 127.0.0.1 only, no durability (the data is thrown away), small memory and
// little WAL kept (the folder may be in /dev/shm), room for many parallel
// tests, and dynamic shared memory in the data folder, so that not even a
// killed server leaves files outside it.
const TestConfig = `
# Added by iam/models/dbtest/pgcluster for a throwaway cluster.
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 200
shared_buffers = 16MB
fsync = off
synchronous_commit = off
full_page_writes = off
wal_level = minimal
max_wal_senders = 0
max_wal_size = 96MB
min_wal_size = 32MB
autovacuum = off
dynamic_shared_memory_type = mmap
log_min_messages = warning
log_checkpoints = off
`

// Options shape a cluster.
type Options struct {
	// Config is appended to postgresql.conf after TestConfig, so its
	// settings win (a benchmark gives more memory and WAL, for example).
	Config string
	// Prefix names the cluster's temporary folder ("iam-pg-" when empty).
	Prefix string
}

// Cluster is a throwaway PostgreSQL cluster run by this process from the
// installed server binaries: its files in a temporary folder (under /dev/shm
// when there is one), listening on 127.0.0.1 only, run as the "postgres"
// system user when this process runs as root (which PostgreSQL refuses). A
// watchdog process stops it and removes its folder should this process end
// without calling Stop (panic, timeout, kill).
type Cluster struct {
	bin      pgBin
	owner    *osUser // the user the server runs as; nil: this process's user
	env      []string
	dir      string // temporary folder holding data/ and postgres.log
	data     string
	logFile  string
	port     int
	startDur time.Duration
	watchdog *watchdog
}

// Start creates and starts a cluster in a new temporary folder and waits
// until it accepts connections. On failure it leaves nothing behind. It
// returns an error wrapping ErrNoServer when no server binaries are
// installed.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	begin := time.Now()
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	owner, err := serverUser()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, owner: owner, env: serverEnv()}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = "iam-pg-"
	}
	c.dir, err = os.MkdirTemp(tempRoot(), prefix)
	if err != nil {
		return nil, fmt.Errorf("create cluster folder: %w", err)
	}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = fmt.Errorf("%w\nthen cleaning up: %w", err, stopErr)
			}
		}
	}()
	if owner != nil {
		if err = os.Chown(c.dir, owner.uid, owner.gid); err != nil {
			return nil, fmt.Errorf("give cluster folder to user %s: %w", owner.name, err)
		}
	}
	c.data = filepath.Join(c.dir, "data")
	c.logFile = filepath.Join(c.dir, "postgres.log")

	// Started first, so that even a crash during initdb leaves nothing.
	if c.watchdog, err = startWatchdog(c); err != nil {
		return nil, fmt.Errorf("start cluster watchdog: %w", err)
	}

	out, err := c.Command(ctx, "initdb", "-D", c.data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("initdb (%s) failed: %w\n%s", c.bin.dir, err, out)
	}
	if err = appendFile(filepath.Join(c.data, "postgresql.conf"), TestConfig+opts.Config); err != nil {
		return nil, fmt.Errorf("configure cluster: %w", err)
	}

	// The free port may be taken by someone else before the server binds
	// it (test processes of other packages start clusters too): retry.
	for attempt := 1; ; attempt++ {
		c.port, err = freePort()
		if err != nil {
			return nil, err
		}
		err = c.StartServer(ctx)
		if err == nil {
			break
		}
		if attempt < 5 && strings.Contains(c.readLog(), "could not bind") {
			continue
		}
		return nil, err
	}
	c.startDur = time.Since(begin)
	return c, nil
}

// StartServer starts the cluster's server (again, after StopServer) on its
// port and waits until it accepts connections.
func (c *Cluster) StartServer(ctx context.Context) error {
	out, err := c.Command(ctx, "pg_ctl", "-D", c.data, "-l", c.logFile, "-w", "-t", "60",
		"-o", "-p "+strconv.Itoa(c.port), "start").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl start (%s) failed: %w\n%s\n%s", c.bin.dir, err, out, c.LogTail())
	}
	return nil
}

// StopServer stops the server and keeps its files, for a fault test that
// starts it again with StartServer. mode is pg_ctl's: "fast" (connections
// cut, a clean shutdown) or "immediate" (as after a crash).
func (c *Cluster) StopServer(ctx context.Context, mode string) error {
	out, err := c.Command(ctx, "pg_ctl", "-D", c.data, "-m", mode, "-w", "-t", "60", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m %s failed: %w\n%s", mode, err, out)
	}
	return nil
}

// Stop stops the server at once (no checkpoint: the data is thrown away),
// killing it should pg_ctl fail, and removes its folder.
func (c *Cluster) Stop() error {
	var errs []error
	if pid := c.postmasterPID(); pid > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := c.Command(ctx, "pg_ctl", "-D", c.data, "-m", "immediate", "-w", "-t", "30", "stop").CombinedOutput()
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("pg_ctl stop failed (killing server process %d instead): %w\n%s", pid, err, out))
			killServer(pid)
		}
	}
	if c.watchdog != nil {
		if err := c.watchdog.release(30 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove cluster folder: %w", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("stop PostgreSQL cluster in %s: %w", c.dir, errors.Join(errs...))
	}
	return nil
}

// Command prepares one of the server programs (initdb, pg_ctl, createdb,
// psql ...), run as the server's user in the cluster's folder.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin.dir, name), args...) //nolint:gosec // G204: an installed PostgreSQL server program; the callers are this package's tests and helpers
	cmd.Dir = c.dir
	cmd.Env = c.env
	cmd.SysProcAttr = procAttr(c.owner, false)
	return cmd
}

// postmasterPID reads the server's process id from its lock file; 0 when it
// is not running.
func (c *Cluster) postmasterPID() int {
	if c.data == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0
	}
	return pid
}

// PID is the server's (postmaster's) process id; 0 when it is not running.
// Its backends are its child processes (benchmarks add up their CPU time).
func (c *Cluster) PID() int { return c.postmasterPID() }

// URL is the superuser URL of database db ("postgres" is the maintenance
// database).
func (c *Cluster) URL(db string) *url.URL {
	return &url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
}

// Port is the TCP port the server listens on (on 127.0.0.1).
func (c *Cluster) Port() int { return c.port }

// BinDir is the folder of the server programs in use.
func (c *Cluster) BinDir() string { return c.bin.dir }

// Describe says where the cluster runs, for logs and error messages.
func (c *Cluster) Describe() string {
	as := ""
	if c.owner != nil {
		as = " as user " + c.owner.name
	}
	return fmt.Sprintf("from %s on 127.0.0.1:%d%s, folder %s, cluster up in %v",
		c.bin.dir, c.port, as, c.dir, c.startDur.Round(time.Millisecond))
}

func (c *Cluster) readLog() string {
	b, _ := os.ReadFile(c.logFile)
	return string(b)
}

// LogTail returns the end of the server's log, for error messages.
func (c *Cluster) LogTail() string {
	const max = 8 << 10
	f, err := os.Open(c.logFile)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	defer func() { _ = f.Close() }() // only read: a failed close loses nothing
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		f.Seek(-max, io.SeekEnd) //nolint:errcheck
	}
	b, _ := io.ReadAll(f)
	return "server log:\n" + strings.TrimRight(string(b), "\n")
}

// pgBin is a folder holding the server programs of one PostgreSQL version.
type pgBin struct {
	dir          string
	version      string
	major, minor int
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)(?:\.(\d+))?`)

// findBinaries looks for initdb, pg_ctl and postgres in the folders of
// initdb and pg_ctl on PATH and in /usr/lib/postgresql/*/bin, and picks the
// newest version. It returns errNoServer only when there are none at all.
func findBinaries() (pgBin, error) {
	var dirs []string
	for _, prog := range []string{"pg_ctl", "initdb"} {
		if p, err := exec.LookPath(prog); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				p = real
			}
			dirs = append(dirs, filepath.Dir(p))
		}
	}
	globbed, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	dirs = append(dirs, globbed...)

	var best pgBin
	var problems []string
	seen := map[string]bool{}
	for _, dir := range dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		var missing []string
		for _, prog := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, prog)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				missing = append(missing, prog)
			}
		}
		if len(missing) > 0 {
			if len(missing) < 3 {
				problems = append(problems, fmt.Sprintf("%s lacks %s", dir, strings.Join(missing, ", ")))
			}
			continue
		}
		out, err := exec.Command(filepath.Join(dir, "pg_ctl"), "--version").Output() //nolint:gosec // G204: the installed server's pg_ctl, with a fixed argument
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s/pg_ctl --version: %v", dir, err))
			continue
		}
		m := versionRE.FindStringSubmatch(string(out))
		if m == nil {
			problems = append(problems, fmt.Sprintf("%s/pg_ctl --version: unexpected output %q", dir, out))
			continue
		}
		b := pgBin{dir: dir, version: strings.TrimSpace(string(out))}
		b.major, _ = strconv.Atoi(m[1])
		b.minor, _ = strconv.Atoi(m[2])
		if best.dir == "" || b.major > best.major || (b.major == best.major && b.minor > best.minor) {
			best = b
		}
	}
	switch {
	case best.dir != "":
		return best, nil
	case len(problems) > 0:
		return pgBin{}, fmt.Errorf("PostgreSQL server binaries are installed but unusable: %s", strings.Join(problems, "; "))
	default:
		return pgBin{}, fmt.Errorf("%w: no PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH or under /usr/lib/postgresql/*/bin; install the PostgreSQL server", ErrNoServer)
	}
}

// serverEnv is this process's environment without what would redirect the
// server programs (PG* variables) or trip them (locale).
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "LC_") || name == "LANG" || name == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// tempRoot is where the cluster's folder goes: /dev/shm when there is one,
// as copying the template on a memory file system is several times faster
// than on disk; otherwise the default temporary folder.
func tempRoot() string {
	const shm = "/dev/shm"
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp(shm, "iam-pg-probe-"); err == nil {
			_ = f.Close() // an empty file: nothing to lose
			// The cluster's folder is removed at the end: a /dev/shm where
			// the probe cannot be removed is not one to use.
			if os.Remove(f.Name()) == nil {
				return shm
			}
		}
	}
	return ""
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err = l.Close(); err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	return port, nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0) //nolint:gosec // G304: a file of the cluster this package made
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}
