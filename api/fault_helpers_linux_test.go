package api_test

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/sqldb"
)

// faultEnv is the setting of a worker fault test: the PostgreSQL database,
// an API environment whose jobs go to a task queue of the test's own, which
// only worker subprocesses (startWorkerProcess) serve, and a client of the
// shared Temporal server.
type faultEnv struct {
	*apitest.Env
	DB                *bun.DB
	DSN, HostPort, NS string
	Temporal          client.Client
}

func newFaultEnv(t *testing.T, queuePrefix string) *faultEnv {
	t.Helper()
	f := &faultEnv{DSN: dbtest.PostgresURL(t)}
	db, err := sqldb.Open(context.Background(), f.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cerr := db.Close(); cerr != nil {
			t.Error(cerr)
		}
	})
	f.DB = db
	f.Env = apitest.New(t, db, apitest.Options{})
	f.HostPort, f.NS = apitest.TemporalAddress(t)
	if f.Temporal, err = client.Dial(client.Options{HostPort: f.HostPort, Namespace: f.NS}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Temporal.Close)
	f.Jobs.Client = f.Temporal
	f.Jobs.TaskQueue = fmt.Sprintf("%s-%d", queuePrefix, sqldb.NewID())
	return f
}

// startWorker starts a worker subprocess on the test's task queue.
func (f *faultEnv) startWorker(t *testing.T, extra ...string) *exec.Cmd {
	t.Helper()
	return startWorkerProcess(t, f.DSN, f.HostPort, f.NS, f.Jobs.TaskQueue, extra...)
}

// killSelfAfterCommits runs times worker subprocesses one after the other,
// each of which SIGKILLs itself right after its after-th committed chunk
// (the test-only hook), so that Temporal retries a chunk already written;
// it fails the test unless each dies so, and logs progress() after each.
func (f *faultEnv) killSelfAfterCommits(t *testing.T, times, after int, began time.Time, progress func() string) {
	t.Helper()
	for range times {
		w := startWorkerProcess(t, f.DSN, f.HostPort, f.NS, f.Jobs.TaskQueue, fmt.Sprintf("%s=%d", envCrashAfterChunkCommit, after))
		_ = w.Wait()
		ws, ok := w.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the worker with %s=%d ended %s, want killed by SIGKILL", envCrashAfterChunkCommit, after, w.ProcessState)
		}
		t.Logf("the worker killed itself after a chunk's commit: %s (%s)", progress(), time.Since(began).Round(time.Millisecond))
	}
}
