package api

import (
	"os"
	"sync"
)

// TEST-ONLY HOOK, as activities/testhook_crash.go. Nothing in the product
// sets this variable, the configuration (cmd/iam/config.go) does not read
// it and docs/configuration.md does not name it: only cmd/iam's end-to-end
// test of idempotency keys puts it in the environment of an `iam serve` it
// starts, to kill that process at the one moment an outside signal cannot
// hit on purpose.
//
// IAM_TEST_CRASH_AFTER_IDEMPOTENT_JOB=1 makes the process SIGKILL itself
// when a request sent with an Idempotency-Key has been answered 2xx by its
// handler (its job committed) and before the answer is recorded or sent.
const testCrashAfterIdempotentJobEnv = "IAM_TEST_CRASH_AFTER_IDEMPOTENT_JOB"

var testCrashIdempotent = sync.OnceValue(func() bool { return os.Getenv(testCrashAfterIdempotentJobEnv) == "1" })

// testHookIdempotentAnswered is called between an idempotent request's
// answer and its recording. Unless the variable above is set, it does
// nothing.
func testHookIdempotentAnswered(status int) {
	if status/100 != 2 || !testCrashIdempotent() {
		return
	}
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill() // SIGKILL: nothing recorded, nothing sent
	}
	select {} // the kill is asynchronous: do nothing meanwhile
}
