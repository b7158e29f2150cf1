// Package secret holds what protects secrets: argon2id password hashes and
// the box (AES-256-GCM) that seals enrollment secrets and blobs at rest. It
// knows nothing of storage; models keeps hashes and sealed bytes.
package secret

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

// Box seals enrollment secrets (TOTP keys) and blob chunks with AES-256-GCM before
// they are stored, so the database never holds them in the clear. The
// additional data binds a sealed secret to its row: a ciphertext copied to
// another user's row does not open.
type Box struct{ aead cipher.AEAD }

// KeySize is the key length Box needs: 32 bytes (AES-256).
const KeySize = 32

// NewBox returns a box over a 32-byte key.
func NewBox(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("the encryption key must be %d bytes, not %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// ParseKey reads a key written as 64 hex digits or as standard or
// URL-safe base64 of 32 bytes.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*KeySize {
		if key, err := hex.DecodeString(s); err == nil {
			return key, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(s); err == nil && len(key) == KeySize {
			return key, nil
		}
	}
	return nil, errors.New("the encryption key must be 32 bytes written as 64 hex digits or base64")
}

// NewKey returns a fresh random key, base64-encoded.
func NewKey() string {
	key := make([]byte, KeySize)
	_, _ = rand.Read(key)
	return base64.StdEncoding.EncodeToString(key)
}

// Seal encrypts plaintext bound to aad; the nonce is prepended.
func (b *Box) Seal(plaintext []byte, aad string) []byte {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	_, _ = rand.Read(nonce)
	return b.aead.Seal(nonce, nonce, plaintext, []byte(aad))
}

// Open decrypts what Seal returned for the same aad.
func (b *Box) Open(sealed []byte, aad string) ([]byte, error) {
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
