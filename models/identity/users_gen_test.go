package identity

import (
	"testing"

	"iam/models/usergen"
)

// TestUserCodeGenerated fails when users_gen.go is not what cmd/usergen
// writes from User's tags now: a field added or changed without go generate.
func TestUserCodeGenerated(t *testing.T) {
	if err := usergen.Check("models", "users.go", "users_gen.go"); err != nil {
		t.Fatal(err)
	}
}
