package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"iam/models"
	"iam/models/identity"
	"iam/models/protection"
)

// TestOrgsCommand_CreateAndList: on dev's data directory, `iam orgs create`
// makes an organization with its first admin (a generated password printed
// once in the output, or IAM_ADMIN_PASSWORD), refuses bad input without
// leaving anything behind, and `iam orgs list` shows every organization;
// `iam token --org` then issues the new admin's tokens.
func TestOrgsCommand_CreateAndList(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	environ := []string{"IAM_DATA_DIR=" + dataDir, "IAM_LOG_LEVEL=error"}

	type created struct {
		ID            string `json:"id"`
		Name          string `json:"name"`
		AdminID       string `json:"admin_id"`
		AdminEmail    string `json:"admin_email"`
		AdminPassword string `json:"admin_password"`
	}
	create := func(environ []string, args ...string) created {
		t.Helper()
		out, errOut, err := runCLI(t, environ, append([]string{"orgs", "create"}, args...)...)
		if err != nil {
			t.Fatalf("orgs create %v: %v\n%s", args, err, errOut)
		}
		var c created
		if err := json.Unmarshal([]byte(out), &c); err != nil {
			t.Fatalf("orgs create printed %q: %v", out, err)
		}
		return c
	}
	acme := create(environ, "--name", "Acme", "--admin-email", "admin@acme.example.com")
	if acme.Name != "Acme" || acme.AdminEmail != "admin@acme.example.com" || len(acme.AdminPassword) < 16 {
		t.Fatalf("created %+v: want a generated password", acme)
	}
	chosen := create(append(environ, "IAM_ADMIN_PASSWORD=a password chosen by the operator"),
		"--name", "Globex", "--admin-email", "root@globex.example.com")
	if chosen.AdminPassword != "" {
		t.Errorf("a password from IAM_ADMIN_PASSWORD was printed: %+v", chosen)
	}

	for _, bad := range [][]string{
		{"--name", "No admin"},
		{"--admin-email", "nobody@example.com"},
		{"--name", "  ", "--admin-email", "x@example.com"},
		{"--name", "Bad email", "--admin-email", "not an email"},
	} {
		if _, _, err := runCLI(t, environ, append([]string{"orgs", "create"}, bad...)...); err == nil {
			t.Errorf("orgs create %v: no error", bad)
		}
	}
	if _, _, err := runCLI(t, append(environ, "IAM_ADMIN_PASSWORD=short"), "orgs", "create", "--name", "Short", "--admin-email", "a@short.example.com"); err == nil {
		t.Error("orgs create with a 5-character IAM_ADMIN_PASSWORD: no error")
	}

	out, _, err := runCLI(t, environ, "orgs", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.HasPrefix(lines[1], acme.ID+" ") ||
		!strings.Contains(lines[1], "Acme") || !strings.HasPrefix(lines[2], chosen.ID+" ") {
		t.Fatalf("orgs list (want the two organizations, none of the refused ones):\n%s", out)
	}

	// Each organization has exactly its admin, an active administrator with
	// the password printed or chosen.
	cfg, err := loadConfig(environ)
	if err != nil {
		t.Fatal(err)
	}
	store, _, err := openAdminStore(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, store)
	for _, c := range []struct {
		org      created
		password string
	}{{acme, acme.AdminPassword}, {chosen, "a password chosen by the operator"}} {
		id, _ := models.ParseID("id", c.org.ID)
		u, getErr := store.Users.GetByEmail(t.Context(), id, c.org.AdminEmail)
		if getErr != nil || models.FormatID(u.ID) != c.org.AdminID || u.Role != identity.RoleAdmin || u.Status != identity.UserActive {
			t.Fatalf("admin of %s: %+v, %v", c.org.Name, u, getErr)
		}
		if _, authErr := store.Users.Authenticate(t.Context(), id, c.org.AdminEmail, c.password, protection.DefaultAdminSettings().AccountBlocking, time.Now()); authErr != nil {
			t.Errorf("admin of %s does not sign in with its password: %v", c.org.Name, authErr)
		}
	}

	// The new admin's tokens, in its own organization.
	out, errOut, err := runCLI(t, environ, "token", "--org", chosen.ID, "--user", chosen.AdminEmail, "--scopes", "svc.user.READ")
	if err != nil || !strings.Contains(out, "access_token") {
		t.Fatalf("token for the new admin: %v\n%s%s", err, out, errOut)
	}
}
