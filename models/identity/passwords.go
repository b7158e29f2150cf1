package identity

import (
	"errors"
	"fmt"

	"iam/models"
	"iam/models/secret"
)

// hashPassword hashes password with secret.HashPassword. EINVALID when its
// length breaks the rule.
func hashPassword(password string) (string, error) {
	h, err := secret.HashPassword(password)
	var lenErr *secret.PasswordLenError
	if errors.As(err, &lenErr) {
		return "", models.Invalid("password", "%s", lenErr.Rule)
	}
	return h, err
}

// EnrollmentSecretAAD is the additional data that binds a sealed enrollment
// secret to its organization, user and factor config.
func EnrollmentSecretAAD(orgID, userID, factorConfigID int64) string {
	return fmt.Sprintf("iam-enrollment:%d:%d:%d", orgID, userID, factorConfigID)
}
