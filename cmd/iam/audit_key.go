package main

import (
	"fmt"
	"path/filepath"

	"iam/models/audit"
	"iam/models/secret"
)

// devAuditKeyFile is where `iam dev` keeps the audit signing key it
// generated, in its data directory.
const devAuditKeyFile = "audit-signing.key"

// auditSigner returns the signer of the audit digests, from
// IAM_AUDIT_SIGNING_KEY. Without it, dev (dataDir set) generates a key once
// and keeps it in its data directory; serve and worker run without one
// (nil): events are written, not sealed.
func auditSigner(cfg Config, dataDir string) (*audit.Signer, error) {
	text := cfg.AuditSigningKey
	if text == "" && dataDir != "" {
		var err error
		if text, err = devKey(filepath.Join(dataDir, devAuditKeyFile)); err != nil {
			return nil, err
		}
	}
	if text == "" {
		return nil, nil
	}
	seed, err := secret.ParseKey(text)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: IAM_AUDIT_SIGNING_KEY: %w", err)
	}
	return audit.NewSigner(seed)
}
