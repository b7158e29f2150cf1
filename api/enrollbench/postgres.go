package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
)

// pgCluster is a throwaway PostgreSQL cluster from the installed binaries,
// configured like the test clusters of models/dbtest (no durability).
type pgCluster struct {
	bin, dir string
	port     int
	cred     *syscall.Credential
}

const pgConfig = `
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
wal_level = minimal
max_wal_senders = 0
max_wal_size = 1GB
shared_buffers = 256MB
`

func startPostgres(ctx context.Context, dir string) (*pgCluster, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Strings(bins)
	if len(bins) == 0 {
		return nil, fmt.Errorf("no PostgreSQL server binaries under /usr/lib/postgresql")
	}
	c := &pgCluster{bin: filepath.Dir(bins[len(bins)-1]), dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 { // the server refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := c.cmd("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	f.WriteString(pgConfig)
	f.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if out, err := c.cmd("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-o", "-p "+strconv.Itoa(c.port), "start").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	if out, err := c.cmd("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", "postgres", "bench").CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("createdb: %v\n%s", err, out)
	}
	return c, nil
}

func (c *pgCluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

func (c *pgCluster) cmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	cmd.Dir = os.TempDir()
	return cmd
}

func (c *pgCluster) stop() {
	cmd := c.cmd("pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "stop")
	_ = cmd.Run()
}
