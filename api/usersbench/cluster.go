package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// cluster is a throwaway PostgreSQL cluster for one benchmark run: in a
// temporary folder (under /dev/shm when there is one), without durability,
// run as the "postgres" user when the benchmark runs as root.
type cluster struct {
	bin, dir string
	port     int
	cred     *syscall.Credential
}

// startCluster finds initdb and pg_ctl (PATH, else the newest
// /usr/lib/postgresql/*/bin), creates a cluster and starts it.
func startCluster(ctx context.Context) (*cluster, error) {
	c := &cluster{}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		c.bin = filepath.Dir(p)
	} else if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(dirs) > 0 {
		c.bin = dirs[len(dirs)-1]
	} else {
		return nil, fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl): install postgresql or set IAM_BENCH_DATABASE_URL")
	}
	root := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		root = "/dev/shm"
	}
	dir, err := os.MkdirTemp(root, "iam-usersbench-pg-")
	if err != nil {
		return nil, err
	}
	c.dir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			c.remove()
			return nil, fmt.Errorf("running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			c.remove()
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		c.remove()
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.remove()
		return nil, err
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off"+
		" -c shared_buffers=1GB -c max_connections=200 -c max_wal_size=4GB -c unix_socket_directories=%s", c.port, dir)
	if out, err := c.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		c.remove()
		return nil, fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	return c, nil
}

// url is the superuser URL of the cluster's postgres database.
func (c *cluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd.CombinedOutput()
}

// stop stops the server at once and removes its folder.
func (c *cluster) stop() {
	_, _ = c.run(context.Background(), "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "stop")
	c.remove()
}

func (c *cluster) remove() { _ = os.RemoveAll(c.dir) }
