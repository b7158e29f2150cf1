package apitest

import (
	"crypto/rand"

	"iam/models"
)

// Secrets is the box the test API and workers seal uploaded files and
// enrollment secrets with: one random key per test process.
var Secrets = func() *models.SecretBox {
	key := make([]byte, models.EncryptionKeySize)
	_, _ = rand.Read(key)
	box, _ := models.NewSecretBox(key) // a 32-byte key always makes a box
	return box
}()
