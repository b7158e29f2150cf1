package apitest

import (
	"os"

	"iam/models/secret"
)

// SecretsKeyEnv names the environment variable that hands the key of
// Secrets to a test's subprocesses (SecretsEnv).
const SecretsKeyEnv = "IAM_TEST_SECRETS_KEY"

var secretsKey = func() string {
	if key := os.Getenv(SecretsKeyEnv); key != "" {
		return key
	}
	return secret.NewKey()
}()

// Secrets is the box the test API and workers seal uploaded files and
// enrollment secrets with: one random key per test process, or the key its
// parent handed it (SecretsEnv).
var Secrets = func() *secret.Box {
	key, err := secret.ParseKey(secretsKey)
	if err != nil {
		panic(SecretsKeyEnv + ": " + err.Error())
	}
	box, _ := secret.NewBox(key) // a 32-byte key always makes a box
	return box
}()

// SecretsEnv is the environment entry that gives a subprocess the same
// Secrets as this process.
func SecretsEnv() string { return SecretsKeyEnv + "=" + secretsKey }
