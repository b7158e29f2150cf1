package apitest

import (
	"os"

	"iam/models"
)

// SecretsKeyEnv names the environment variable that hands the key of
// Secrets to a test's subprocesses (SecretsEnv).
const SecretsKeyEnv = "IAM_TEST_SECRETS_KEY"

var secretsKey = func() string {
	if key := os.Getenv(SecretsKeyEnv); key != "" {
		return key
	}
	return models.NewEncryptionKey()
}()

// Secrets is the box the test API and workers seal uploaded files and
// enrollment secrets with: one random key per test process, or the key its
// parent handed it (SecretsEnv).
var Secrets = func() *models.SecretBox {
	key, err := models.ParseEncryptionKey(secretsKey)
	if err != nil {
		panic(SecretsKeyEnv + ": " + err.Error())
	}
	box, _ := models.NewSecretBox(key) // a 32-byte key always makes a box
	return box
}()

// SecretsEnv is the environment entry that gives a subprocess the same
// Secrets as this process.
func SecretsEnv() string { return SecretsKeyEnv + "=" + secretsKey }
