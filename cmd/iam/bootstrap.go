package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"

	"iam/models"
)

// defaultAdminEmail is the first admin's email when IAM_BOOTSTRAP_ADMIN_EMAIL
// is not set.
const defaultAdminEmail = "admin@example.com"

// ensureAdmin gives the organization its first admin when it has none: the
// email and password of IAM_BOOTSTRAP_ADMIN_EMAIL and _PASSWORD, or a
// generated password printed once to out (never logged). An admin made by
// another process starting at the same time is not an error.
func ensureAdmin(ctx context.Context, store *models.Store, org *models.Organization, cfg OAuthConfig, out io.Writer, log *slog.Logger) error {
	users := store.Users
	ok, err := users.HasAdmin(ctx, org.ID)
	if err != nil || ok {
		return err
	}
	email, password, generated := cfg.BootstrapAdminEmail, cfg.BootstrapAdminPassword, false
	if email == "" {
		email = defaultAdminEmail
	}
	if password == "" {
		raw := make([]byte, 15)
		_, _ = rand.Read(raw)
		password, generated = base64.RawURLEncoding.EncodeToString(raw), true
	}
	admin := &models.User{OrgID: org.ID, Email: email, DisplayName: "Administrator", Role: models.RoleAdmin, Status: models.UserActive}
	err = users.Create(ctx, admin, password)
	switch {
	case models.ErrorCode(err) == models.ECONFLICT:
		if ok, herr := users.HasAdmin(ctx, org.ID); herr == nil && ok {
			return nil // another process made it
		}
		return fmt.Errorf("create the first admin: a user with email %s exists but is no admin", email)
	case err != nil:
		return fmt.Errorf("create the first admin (IAM_BOOTSTRAP_ADMIN_EMAIL, IAM_BOOTSTRAP_ADMIN_PASSWORD): %w", err)
	}
	log.Info("created the first admin", "org_id", org.ID, "user_id", admin.ID, "email", email, "generated_password", generated)
	if generated {
		fmt.Fprintf(out, "Created the first admin %s with password %s\n(shown only this once: sign in and keep it safe, or set IAM_BOOTSTRAP_ADMIN_PASSWORD next time)\n", email, password)
	}
	return nil
}
