package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"iam/api/oauth"
	"iam/models/oauthstore"
)

func TestOAuthSecret(t *testing.T) {
	dir := t.TempDir()
	if _, err := oauthSecret(OAuthConfig{SecretKey: "short"}, dir, true); err == nil || !strings.Contains(err.Error(), "IAM_SECRET_KEY") {
		t.Errorf("a short IAM_SECRET_KEY: %v", err)
	}
	if _, err := oauthSecret(OAuthConfig{}, "", false); err == nil || !strings.Contains(err.Error(), "IAM_SECRET_KEY is required") {
		t.Errorf("serve without IAM_SECRET_KEY: %v", err)
	}
	if _, err := oauthSecret(OAuthConfig{}, dir, false); err == nil {
		t.Error("no secret file and no permission to make one: no error")
	}

	first, err := oauthSecret(OAuthConfig{}, dir, true)
	if err != nil || len(first) < oauth.MinSecretLen {
		t.Fatalf("made secret %d bytes, %v", len(first), err)
	}
	path := filepath.Join(dir, secretFile)
	if fi, statErr := os.Stat(path); statErr != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode %v, %v; want 0600", fi.Mode().Perm(), statErr)
	}
	again, err := oauthSecret(OAuthConfig{}, dir, true)
	if err != nil || !bytes.Equal(first, again) {
		t.Errorf("the second start got another secret (%v)", err)
	}
	env := strings.Repeat("e", 40)
	if got, _ := oauthSecret(OAuthConfig{SecretKey: env}, dir, true); string(got) != env {
		t.Error("IAM_SECRET_KEY does not win over the file")
	}
	if err := os.Chmod(path, 0o644); err != nil { //nolint:gosec // a secret file others may read is what the test is about
		t.Fatal(err)
	}
	if _, err := oauthSecret(OAuthConfig{}, dir, true); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a secret file others may read: %v", err)
	}
}

func TestPublicURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		":8080":          "http://localhost:8080",
		"[::]:9000":      "http://localhost:9000",
	} {
		if got := publicURL(OAuthConfig{}, addr); got != want {
			t.Errorf("publicURL(%q) = %q, want %q", addr, got, want)
		}
	}
	if got := publicURL(OAuthConfig{PublicURL: "https://iam.example.com"}, ":8080"); got != "https://iam.example.com" {
		t.Errorf("IAM_PUBLIC_URL ignored: %q", got)
	}
}

// runCLI runs the binary's command line in process.
func runCLI(t *testing.T, environ []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, environ, &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestTokenAndClientsCommands: on dev's data directory, `iam token` issues a
// token the server accepts (same secret file), registering the self client
// once; `iam clients` creates, lists and deletes clients.
func TestTokenAndClientsCommands(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	environ := []string{"IAM_DATA_DIR=" + dataDir, "IAM_LOG_LEVEL=error"}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	// The first start of dev: organization, admin and secret.
	cfg, err := loadConfig(append(environ, "IAM_BOOTSTRAP_ADMIN_PASSWORD=a long admin password"))
	if err != nil {
		t.Fatal(err)
	}
	store, _, err := openAdminStore(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, store)
	var printed bytes.Buffer
	org, err := bootstrapOrg(ctx, store, cfg.OAuth, &printed, log)
	if err != nil {
		t.Fatal(err)
	}
	if printed.Len() != 0 {
		t.Errorf("a configured password was printed: %q", printed.String())
	}
	if again, againErr := bootstrapOrg(ctx, store, cfg.OAuth, &printed, log); againErr != nil || again.ID != org.ID {
		t.Errorf("second start: %v, %v (want organization %d again)", again, againErr, org.ID)
	}
	secret, err := oauthSecret(cfg.OAuth, dataDir, true)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newOAuthServer(cfg.OAuth, store, secret, "http://127.0.0.1:8080", log)
	if err != nil {
		t.Fatal(err)
	}

	out, errOut, err := runCLI(t, environ, "token", "--user", defaultAdminEmail, "--scopes", "svc.job.READ,svc.user.ALL", "--offline")
	if err != nil {
		t.Fatalf("iam token: %v\n%s", err, errOut)
	}
	var tok oauth.TokenResponse
	if err = json.Unmarshal([]byte(out), &tok); err != nil {
		t.Fatalf("iam token printed %q: %v", out, err)
	}
	if tok.TokenType != "Bearer" || tok.ExpiresIn != 3600 || tok.RefreshToken == "" || tok.Scope != "svc.job.READ svc.user.ALL" {
		t.Errorf("token = %+v", tok)
	}
	if !strings.Contains(errOut, "Registered the self client") {
		t.Errorf("stderr does not announce the self client: %q", errOut)
	}
	p, err := srv.ValidateAccessToken(ctx, tok.AccessToken)
	if err != nil || p.OrgID != org.ID {
		t.Fatalf("the server refuses the printed token: %v", err)
	}
	if _, errOut, tokenErr := runCLI(t, environ, "token", "--user", defaultAdminEmail, "--scopes", "svc.job.READ"); tokenErr != nil || strings.Contains(errOut, "Registered") {
		t.Errorf("second token: %v, stderr %q (the self client is made once)", tokenErr, errOut)
	}
	if _, _, err = runCLI(t, environ, "token", "--user", "nobody@example.com", "--scopes", "svc.job.READ"); err == nil {
		t.Error("a token for an unknown user")
	}
	if _, _, err = runCLI(t, environ, "token", "--user", defaultAdminEmail, "--scopes", "svc.nothing.READ"); err == nil {
		t.Error("a token with an unknown scope")
	}

	out, _, err = runCLI(t, environ, "clients", "create", "--name", "Portal", "--type", "server-based",
		"--homepage", "https://portal.example.com", "--redirect-uri", "https://portal.example.com/cb")
	if err != nil {
		t.Fatalf("clients create: %v", err)
	}
	var created struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
		Type   string `json:"type"`
	}
	if err = json.Unmarshal([]byte(out), &created); err != nil || created.Secret == "" || created.Type != "server" {
		t.Fatalf("clients create printed %s (%v)", out, err)
	}
	stored, err := store.OAuthClients.Get(ctx, created.ID)
	if err != nil || !oauthstore.ClientSecretMatches(stored.SecretHash, created.Secret) || strings.Contains(stored.SecretHash, created.Secret) {
		t.Errorf("stored client %+v, %v: want the secret's hash only", stored, err)
	}
	if _, _, err = runCLI(t, environ, "clients", "create", "--name", "Bad", "--type", "server", "--redirect-uri", "http://example.com/cb"); err == nil {
		t.Error("clients create accepted a plain-http redirect URI and no homepage")
	}
	out, _, err = runCLI(t, environ, "clients", "create", "--name", "Okta provisioning", "--type", "service", "--scopes", "svc.scim.all, svc.scim.READ")
	if err != nil {
		t.Fatalf("clients create --type service: %v", err)
	}
	var service struct {
		ID     string   `json:"client_id"`
		Secret string   `json:"client_secret"`
		Scopes []string `json:"scopes"`
	}
	if err = json.Unmarshal([]byte(out), &service); err != nil || service.Secret == "" || !slices.Equal(service.Scopes, []string{"svc.scim.ALL", "svc.scim.READ"}) {
		t.Fatalf("clients create --type service printed %s (%v)", out, err)
	}
	for _, bad := range [][]string{
		{"--type", "service"},                             // no scopes
		{"--type", "service", "--scopes", "svc.user.ALL"}, // not a SCIM scope
		{"--type", "self", "--scopes", "svc.scim.ALL"},    // scopes on a user-bound type
		{"--type", "service", "--scopes", "svc.scim.ALL", "--redirect-uri", "https://example.com/cb"},
	} {
		if _, _, err = runCLI(t, environ, append([]string{"clients", "create", "--name", "Bad"}, bad...)...); err == nil {
			t.Errorf("clients create %v: accepted", bad)
		}
	}
	out, _, err = runCLI(t, environ, "clients", "list")
	if err != nil || !strings.Contains(out, created.ID) || !strings.Contains(out, "self") || !strings.Contains(out, service.ID) {
		t.Errorf("clients list: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, environ, "clients", "delete", created.ID); err != nil {
		t.Errorf("clients delete: %v", err)
	}
	if _, _, err := runCLI(t, environ, "clients", "delete", created.ID); err == nil {
		t.Error("deleting a deleted client: no error")
	}
}
