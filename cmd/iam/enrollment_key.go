package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"iam/models/secret"
)

// devKeyFile is where `iam dev` keeps the key it generated, in its data
// directory.
const devKeyFile = "encryption.key"

// enrollmentSecrets returns the box that seals uploaded files and
// enrollment secrets at rest, from IAM_ENCRYPTION_KEY. Without it, dev
// (dataDir set) generates a key once and keeps it in its data directory;
// serve and worker refuse to start (the API seals the files it keeps, the
// worker opens them).
func enrollmentSecrets(cfg Config, dataDir string) (*secret.Box, error) {
	text := cfg.EncryptionKey
	if text == "" && dataDir != "" {
		var err error
		if text, err = devKey(filepath.Join(dataDir, devKeyFile)); err != nil {
			return nil, err
		}
	}
	if text == "" {
		return nil, errors.New("invalid configuration: IAM_ENCRYPTION_KEY is required: it seals uploaded files and enrollment secrets at rest " +
			"(32 random bytes as base64 or 64 hex digits, the same on every serve and worker; for example `openssl rand -base64 32`)")
	}
	key, err := secret.ParseKey(text)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: IAM_ENCRYPTION_KEY: %w", err)
	}
	return secret.NewBox(key)
}

// devKey reads the key file at path, creating it (mode 0600) on first use.
func devKey(path string) (string, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the key file the operator configured
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read the encryption key: %w", err)
	}
	if err = os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return "", fmt.Errorf("create the data directory: %w", err)
	}
	key := secret.NewKey()
	//nolint:gosec // the key file the operator configured
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) { // another process made it first
		return devKey(path)
	}
	if err != nil {
		return "", fmt.Errorf("write the encryption key: %w", err)
	}
	_, err = f.WriteString(key + "\n")
	if err = errors.Join(err, f.Close()); err != nil {
		return "", fmt.Errorf("write the encryption key: %w", err)
	}
	return key, nil
}
