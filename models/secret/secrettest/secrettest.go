// Package secrettest gives tests one secret.Box per test process: the box
// the test API, its workers and the activities' tests seal uploaded files and
// enrollment secrets with. It sits below every layer that uses it, so a test
// of the activities or the worker gets it without linking the API's harness.
package secrettest

import (
	"os"

	"iam/models/secret"
)

// KeyEnv names the environment variable that hands the key of Box to a
// test's subprocesses (Env).
const KeyEnv = "IAM_TEST_SECRETS_KEY"

var key = func() string {
	if k := os.Getenv(KeyEnv); k != "" {
		return k
	}
	return secret.NewKey()
}()

// Box is the test process's box: one random key per test process, or the
// key its parent handed it (Env).
var Box = func() *secret.Box {
	k, err := secret.ParseKey(key)
	if err != nil {
		panic(KeyEnv + ": " + err.Error())
	}
	box, _ := secret.NewBox(k) // a 32-byte key always makes a box
	return box
}()

// Env is the environment entry that gives a subprocess the same Box as this
// process.
func Env() string { return KeyEnv + "=" + key }
