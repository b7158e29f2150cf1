package secret_test

import (
	"errors"
	"testing"

	"iam/models/secret"
)

const right = "correct horse battery"

func TestPasswords(t *testing.T) {
	h1, err := secret.HashPassword(right)
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := secret.HashPassword(right)
	if h1 == h2 {
		t.Error("two hashes of one password are equal: no salt")
	}
	if !secret.VerifyPassword(h1, right) || !secret.VerifyPassword(h2, right) {
		t.Error("the right password does not verify")
	}
	for _, bad := range []struct{ hash, password string }{
		{h1, "wrong"},
		{h1, right + " "},
		{"", right},
		{"$argon2id$v=19$m=99999999,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", right},
		{"plain text", "plain text"},
	} {
		if secret.VerifyPassword(bad.hash, bad.password) {
			t.Errorf("VerifyPassword(%q, %q) = true", bad.hash, bad.password)
		}
	}
	var lenErr *secret.PasswordLenError
	if _, err := secret.HashPassword("short"); !errors.As(err, &lenErr) {
		t.Errorf("HashPassword(short) = %v, want a PasswordLenError", err)
	}
}
