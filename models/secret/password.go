package secret

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Passwords are stored as argon2id hashes in the PHC string form
// $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<hash> (base64 without
// padding), so that the parameters of each hash travel with it and can be
// raised later without breaking stored hashes.
//
// The parameters are OWASP's recommended minimum for argon2id (19 MiB, two
// passes, one lane): tens of milliseconds per check on a server core.
const (
	argonMemoryKiB = 19 * 1024
	argonPasses    = 2
	argonLanes     = 1
	argonSaltLen   = 16
	argonKeyLen    = 32
)

// Password length rules, in bytes.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 1024
)

// HashPassword returns the argon2id hash of password in PHC string form.
// A *PasswordLenError when the password is shorter than MinPasswordLen or longer than
// MaxPasswordLen bytes.
func HashPassword(password string) (string, error) {
	if err := checkPasswordLen(password); err != nil {
		return "", err
	}
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, argonPasses, argonMemoryKiB, argonLanes, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemoryKiB, argonPasses, argonLanes, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// PasswordLenError is HashPassword's answer to a password outside
// MinPasswordLen..MaxPasswordLen bytes. Rule is what the password must be.
type PasswordLenError struct{ Rule string }

func (e *PasswordLenError) Error() string { return "password " + e.Rule }

func checkPasswordLen(password string) error {
	switch {
	case len(password) < MinPasswordLen:
		return &PasswordLenError{Rule: fmt.Sprintf("must be at least %d characters", MinPasswordLen)}
	case len(password) > MaxPasswordLen:
		return &PasswordLenError{Rule: fmt.Sprintf("must be at most %d bytes", MaxPasswordLen)}
	}
	return nil
}

// VerifyPassword reports whether password matches hash, a PHC string made by
// HashPassword. An empty or malformed hash matches nothing. The comparison
// takes constant time in the hash.
func VerifyPassword(hash, password string) bool {
	if len(password) > MaxPasswordLen {
		return false
	}
	p, salt, want, ok := parsePasswordHash(hash)
	if !ok {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, p.passes, p.memoryKiB, p.lanes, uint32(len(want))) //nolint:gosec // the key length, which parsePasswordHash bounds
	return subtle.ConstantTimeCompare(got, want) == 1
}

// DummyPasswordHash is checked against when there is no user, so that a
// wrong email costs as much time as a wrong password.
var DummyPasswordHash = func() string {
	h, _ := HashPassword("no user has this password")
	return h
}()

type argonParams struct {
	memoryKiB, passes uint32
	lanes             uint8
}

// parsePasswordHash splits a PHC argon2id string into its parameters, salt
// and key, refusing parameters far outside what HashPassword writes (a
// tampered row must not make a check take minutes).
func parsePasswordHash(hash string) (argonParams, []byte, []byte, bool) {
	var p argonParams
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return p, nil, nil, false
	}
	var lanes uint32
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memoryKiB, &p.passes, &lanes); err != nil {
		return p, nil, nil, false
	}
	if p.memoryKiB < 8 || p.memoryKiB > 1<<20 || p.passes < 1 || p.passes > 16 || lanes < 1 || lanes > 16 {
		return p, nil, nil, false
	}
	p.lanes = uint8(lanes)
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(parts[4])
	key, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(key) < 16 {
		return p, nil, nil, false
	}
	return p, salt, key, true
}
