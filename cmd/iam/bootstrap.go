package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"

	"iam/models"
	"iam/models/identity"
	"iam/models/store"
)

// defaultAdminEmail is the first admin's email when IAM_BOOTSTRAP_ADMIN_EMAIL
// is not set.
const defaultAdminEmail = "admin@example.com"

// firstOrgName is the name of the organization the first start makes.
const firstOrgName = "Default organization"

// createOrg makes an organization with its first admin (email, and password
// or, when empty, a generated one): models.Store.CreateOrganization, the one
// path of `iam orgs create` and of the first start's organization. It
// returns the admin and the generated password ("" when one was given).
func createOrg(ctx context.Context, store *store.Store, org *identity.Organization, email, password string, log *slog.Logger) (*identity.User, string, error) {
	admin, generated, err := store.Orgs.CreateOrganization(ctx, org, identity.FirstAdmin{Email: email, Password: password})
	if err != nil {
		return nil, "", err
	}
	log.Info("created an organization", "event", "org.created", "org_id", org.ID, "name", org.Name,
		"admin_user_id", admin.ID, "admin_email", admin.Email, "generated_password", generated != "")
	return admin, generated, nil
}

// bootstrapOrg gives a fresh database its first organization with its admin
// (createOrg, as `iam orgs create` does), the admin being
// IAM_BOOTSTRAP_ADMIN_EMAIL with IAM_BOOTSTRAP_ADMIN_PASSWORD or a generated
// password printed once to out (never logged). When the first organization
// exists without an admin (made by `iam clients` or `iam token` on a fresh
// database), it gives it one the same way.
func bootstrapOrg(ctx context.Context, store *store.Store, cfg OAuthConfig, out io.Writer, log *slog.Logger) (*identity.Organization, error) {
	email := cmp.Or(cfg.BootstrapAdminEmail, defaultAdminEmail)
	org, err := store.Orgs.First(ctx)
	switch {
	case models.ErrorCode(err) == models.ENOTFOUND:
		org = &identity.Organization{Name: firstOrgName}
		var generated string
		if _, generated, err = createOrg(ctx, store, org, email, cfg.BootstrapAdminPassword, log); err != nil {
			return nil, fmt.Errorf("create the first organization and its admin (IAM_BOOTSTRAP_ADMIN_EMAIL, IAM_BOOTSTRAP_ADMIN_PASSWORD): %w", err)
		}
		return org, printFirstAdmin(out, email, generated)
	case err != nil:
		return nil, err
	}
	return org, ensureAdmin(ctx, store, org, email, cfg.BootstrapAdminPassword, out, log)
}

// ensureAdmin gives org its first admin when it has none. An admin made by
// another process starting at the same time is not an error.
func ensureAdmin(ctx context.Context, store *store.Store, org *identity.Organization, email, password string, out io.Writer, log *slog.Logger) error {
	users := store.Users
	ok, err := users.HasAdmin(ctx, org.ID)
	if err != nil || ok {
		return err
	}
	admin, generated, err := users.AddFirstAdmin(ctx, org.ID, identity.FirstAdmin{Email: email, Password: password})
	switch {
	case models.ErrorCode(err) == models.ECONFLICT:
		if ok, herr := users.HasAdmin(ctx, org.ID); herr == nil && ok {
			return nil // another process made it
		}
		return fmt.Errorf("create the first admin: a user with email %s exists but is no admin", email)
	case err != nil:
		return fmt.Errorf("create the first admin (IAM_BOOTSTRAP_ADMIN_EMAIL, IAM_BOOTSTRAP_ADMIN_PASSWORD): %w", err)
	}
	log.Info("created the first admin", "org_id", org.ID, "user_id", admin.ID, "email", email, "generated_password", generated != "")
	return printFirstAdmin(out, email, generated)
}

// printFirstAdmin shows a generated password of the first admin, once; a
// failed write is an error, the password being shown nowhere else.
func printFirstAdmin(out io.Writer, email, generated string) error {
	if generated == "" {
		return nil
	}
	_, err := fmt.Fprintf(out, "Created the first admin %s with password %s\n(shown only this once: sign in and keep it safe, or set IAM_BOOTSTRAP_ADMIN_PASSWORD next time)\n", email, generated)
	if err != nil {
		return fmt.Errorf("print the first admin's password: %w", err)
	}
	return nil
}
