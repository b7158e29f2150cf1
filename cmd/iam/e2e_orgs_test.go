package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"iam/models/dbtest"
)

// TestOrgsCommand_TenantsAreIsolated: against `iam serve` of the production
// build on PostgreSQL, the built binary's `iam orgs create` makes a second
// organization (B) beside the one the first start made (A); `iam orgs list`
// shows both. A token of B's admin (`iam token --org`) then gets 404 for
// A's user, group and device, which A's own token reads (200), and B's
// lists show none of A's rows.
func TestOrgsCommand_TenantsAreIsolated(t *testing.T) {
	t.Parallel()
	dsn := dbtest.PostgresURL(t)
	e2eEmptySchema(t, dsn)
	dbEnv := []string{"IAM_DATABASE_URL=" + dsn}
	if code, _, errOut := e2eRun(t, "migrate-up", dbEnv, "migrate", "up"); code != 0 {
		t.Fatalf("iam migrate up exited %d: %s", code, errOut)
	}
	temporalAddr, namespace := e2eTemporal(t)
	shape := e2eStartShape(t, dsn, temporalAddr, namespace)
	apiAddr := shape.apiAddr

	// Organization B, made by the binary.
	code, out, errOut := e2eRun(t, "orgs-create", dbEnv, "orgs", "create", "--name", "Tenant B", "--admin-email", "admin@b.example.com")
	if code != 0 {
		t.Fatalf("iam orgs create exited %d: %s", code, errOut)
	}
	var orgB struct {
		ID            string `json:"id"`
		AdminEmail    string `json:"admin_email"`
		AdminPassword string `json:"admin_password"`
	}
	if err := json.Unmarshal([]byte(out), &orgB); err != nil || orgB.ID == "" || orgB.AdminPassword == "" {
		t.Fatalf("iam orgs create printed %q (%v): want the organization and a generated password", out, err)
	}
	if !strings.Contains(errOut, "shown only this once") {
		t.Errorf("iam orgs create does not say the password is shown once: %q", errOut)
	}
	code, out, errOut = e2eRun(t, "orgs-list", dbEnv, "orgs", "list")
	if code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 2 || !strings.Contains(out, "Tenant B") || !strings.Contains(out, orgB.ID) {
		t.Fatalf("iam orgs list exited %d:\n%s%s", code, out, errOut)
	}

	const scopes = "svc.user.ALL,svc.group.ALL,svc.device.ALL,svc.conditional_access_policy.READ"
	tokenEnv := []string{"IAM_DATABASE_URL=" + dsn, "IAM_SECRET_KEY=" + e2eSecretKey}
	tokA := e2eIssueToken(t, tokenEnv, scopes, "--user", e2eAdminEmail)
	tokB := e2eIssueToken(t, tokenEnv, scopes, "--org", orgB.ID, "--user", orgB.AdminEmail)

	// A's user, group and device.
	var user, group struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	e2eAPIJSON(t, apiAddr, "POST", "/api/v1/users", tokA, map[string]any{"firstName": "Alice", "email": "alice@a.example.com"}, http.StatusCreated, &user)
	e2eAPIJSON(t, apiAddr, "POST", "/api/v1/groups", tokA, map[string]any{"name": "Staff", "members": []string{user.Data.ID}}, http.StatusCreated, &group)
	var agents struct {
		Data []struct {
			Type string `json:"type"`
			Key  string `json:"installation_key"`
		} `json:"data"`
	}
	e2eAPIJSON(t, apiAddr, "GET", "/api/v1/protection/agents-info", tokA, nil, http.StatusOK, &agents)
	if len(agents.Data) == 0 || agents.Data[0].Type != "DeviceAgent" {
		t.Fatalf("agents-info %+v", agents)
	}
	var device struct {
		ID string `json:"device_id"`
	}
	e2eAPIJSON(t, apiAddr, "POST", "/agent/v1/register", "", map[string]any{
		"installation_key": agents.Data[0].Key, "agent_type": "DeviceAgent", "platform": "windows",
		"facts": map[string]any{"name": "PC-A", "os_type": "Windows", "join_type": "ADJoined", "serial_number": "A-1",
			"agent_version": "1.0.0", "ip_address": "10.1.2.3", "dns_hostname": "pc-a.corp"}}, http.StatusCreated, &device)

	for _, path := range []string{"/api/v1/users/" + user.Data.ID, "/api/v1/groups/" + group.Data.ID, "/api/v1/devices/" + device.ID} {
		if status, body := e2eAPIGet(t, apiAddr, path, tokA); status != http.StatusOK {
			t.Errorf("organization A reads its own %s: %d %.300s", path, status, body)
		}
		if status, body := e2eAPIGet(t, apiAddr, path, tokB); status != http.StatusNotFound {
			t.Errorf("organization B reads A's %s: %d %.300s, want 404", path, status, body)
		}
	}
	for _, path := range []string{"/api/v1/users", "/api/v1/groups", "/api/v1/devices"} {
		status, body := e2eAPIGet(t, apiAddr, path, tokB)
		if status != http.StatusOK {
			t.Fatalf("B lists %s: %d %.300s", path, status, body)
		}
		for _, id := range []string{user.Data.ID, group.Data.ID, device.ID} {
			if strings.Contains(string(body), id) {
				t.Errorf("B's %s shows A's %s: %.500s", path, id, body)
			}
		}
	}
	// B's list of users holds its admin alone.
	_, body := e2eAPIGet(t, apiAddr, "/api/v1/users", tokB)
	if !strings.Contains(string(body), orgB.AdminEmail) || strings.Contains(string(body), e2eAdminEmail) {
		t.Errorf("B's users: %.500s", body)
	}
}
