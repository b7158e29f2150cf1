package activities

import (
	"os"
	"strconv"
	"sync"
	"sync/atomic"
)

// TEST-ONLY HOOK. Nothing in the product sets this variable, the
// configuration (cmd/iam/config.go) does not read it and docs/configuration.md does not
// name it: only the fault tests (api/enrollment_fault_linux_test.go,
// cmd/iam's end-to-end tests) put it in the environment of a process they
// start, to kill that process at the one moment an outside signal cannot
// hit on purpose.
//
// IAM_TEST_CRASH_AFTER_CHUNK_COMMIT=<n> makes the process SIGKILL itself
// right after the n-th enrollment chunk, management batch or sync batch it commits
// (ApplyChunk returned) and before the activity completes: Temporal then
// retries a chunk whose rows, results and progress are already written.
const testCrashAfterChunkCommitEnv = "IAM_TEST_CRASH_AFTER_CHUNK_COMMIT"

var testCrash struct {
	once      sync.Once
	after     int64 // 0: never
	committed atomic.Int64
}

// testHookChunkCommitted is called after each committed enrollment chunk
// management batch and account-linking sync batch.
// Unless the test-only variable above is set, it does nothing.
func testHookChunkCommitted() {
	testCrash.once.Do(func() {
		if n, err := strconv.ParseInt(os.Getenv(testCrashAfterChunkCommitEnv), 10, 64); err == nil && n > 0 {
			testCrash.after = n
		}
	})
	if testCrash.after == 0 || testCrash.committed.Add(1) != testCrash.after {
		return
	}
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill() // SIGKILL: no deferred function, no activity completion
	}
	select {} // the kill is asynchronous: complete nothing meanwhile
}
