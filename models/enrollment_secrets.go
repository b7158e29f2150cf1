package models

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SecretBox seals enrollment secrets (TOTP keys) with AES-256-GCM before
// they are stored, so the database never holds them in the clear. The
// additional data binds a sealed secret to its row: a ciphertext copied to
// another user's row does not open.
type SecretBox struct{ aead cipher.AEAD }

// EncryptionKeySize is the key length SecretBox needs: 32 bytes (AES-256).
const EncryptionKeySize = 32

// NewSecretBox returns a box over a 32-byte key.
func NewSecretBox(key []byte) (*SecretBox, error) {
	if len(key) != EncryptionKeySize {
		return nil, fmt.Errorf("the encryption key must be %d bytes, not %d", EncryptionKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &SecretBox{aead: aead}, nil
}

// ParseEncryptionKey reads a key written as 64 hex digits or as standard or
// URL-safe base64 of 32 bytes.
func ParseEncryptionKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*EncryptionKeySize {
		if key, err := hex.DecodeString(s); err == nil {
			return key, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(s); err == nil && len(key) == EncryptionKeySize {
			return key, nil
		}
	}
	return nil, errors.New("the encryption key must be 32 bytes written as 64 hex digits or base64")
}

// NewEncryptionKey returns a fresh random key, base64-encoded.
func NewEncryptionKey() string {
	key := make([]byte, EncryptionKeySize)
	_, _ = rand.Read(key)
	return base64.StdEncoding.EncodeToString(key)
}

// Seal encrypts plaintext bound to aad; the nonce is prepended.
func (b *SecretBox) Seal(plaintext []byte, aad string) []byte {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	_, _ = rand.Read(nonce)
	return b.aead.Seal(nonce, nonce, plaintext, []byte(aad))
}

// Open decrypts what Seal returned for the same aad.
func (b *SecretBox) Open(sealed []byte, aad string) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n+b.aead.Overhead() {
		return nil, errors.New("sealed secret is too short")
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], []byte(aad))
	if err != nil {
		return nil, errors.New("sealed secret does not open with this key")
	}
	return plain, nil
}

// EnrollmentSecretAAD is the additional data that binds a sealed enrollment
// secret to its organization, user and factor config.
func EnrollmentSecretAAD(orgID, userID, factorConfigID int64) string {
	return fmt.Sprintf("iam-enrollment:%d:%d:%d", orgID, userID, factorConfigID)
}
