package apitest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"iam/api/auth"
	"sync"
)

// Tokens is a test-only token source: tokens minted here are valid until
// revoked. Tests of the real OAuth server use real tokens instead.
type Tokens struct {
	mu     sync.Mutex
	tokens map[string]*auth.Principal
}

// Mint returns a new token for the principal.
func (s *Tokens) Mint(p auth.Principal) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := "test-" + hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens == nil {
		s.tokens = map[string]*auth.Principal{}
	}
	s.tokens[tok] = &p
	return tok
}

// Revoke makes a token invalid.
func (s *Tokens) Revoke(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, tok)
}

// ValidateAccessToken implements auth.TokenValidator.
func (s *Tokens) ValidateAccessToken(_ context.Context, tok string) (*auth.Principal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.tokens[tok]; ok {
		cp := *p
		return &cp, nil
	}
	return nil, errors.New("unknown token")
}
