package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"iam/cmd/internal/iamproc"
)

const adminEmail = "admin@example.com"

// allScopes is every scope the /api/v1 and /scim/v2 routes check
// (api/routes.go): ALL of each resource, READ of meta (its only operation).
var allScopes = []string{"svc.job.ALL", "svc.user.ALL", "svc.group.ALL", "svc.auth.ALL",
	"svc.quick_enrollment.ALL", "svc.device.ALL", "svc.conditional_access_policy.ALL",
	"svc.conditional_factor_config.ALL", "svc.management.ALL", "svc.notification_template.ALL",
	"svc.audit.ALL", "svc.event_hook.ALL", "svc.provisioning_token.ALL", "svc.scim.ALL", "svc.meta.READ"}

// startDev starts `iam dev` on a fresh data directory under work and returns
// its base URL and an access token with every scope.
func startDev(bin, work string) (base, token string, stop func(), err error) {
	port, err := iamproc.FreePort()
	if err != nil {
		return "", "", nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := []string{"IAM_DATA_DIR=" + filepath.Join(work, "data"), "IAM_LOG_LEVEL=warn",
		"IAM_DEV_TEMPORAL_PORT=0", "IAM_DEV_UI_PORT=0", "IAM_HTTP_ADDR=" + addr,
		"IAM_BOOTSTRAP_ADMIN_EMAIL=" + adminEmail, "IAM_BOOTSTRAP_ADMIN_PASSWORD=contract-fuzz-admin"}
	dev, err := iamproc.Start(bin, work, "dev", env)
	if err != nil {
		return "", "", nil, err
	}
	base = "http://" + addr
	if err = iamproc.WaitFor(base+"/readyz", 2*time.Minute); err != nil {
		dev.Stop()
		return "", "", nil, fmt.Errorf("iam dev (log in %s): %w", work, err)
	}
	if token, err = iamproc.Token(bin, env, adminEmail, allScopes...); err != nil {
		dev.Stop()
		return "", "", nil, err
	}
	return base, token, dev.Stop, nil
}

// seeded is what the seed made: ids by the name of the parameter or
// property that takes them, a device's credentials, and the admin the
// fuzzer must not remove.
type seeded struct {
	base, token, device string
	adminID             string
	doomed              int // users made for delete-users executions
	values              map[string][]any
	warnings            []string
}

// idKinds names the kind of stored resource a parameter or property takes
// by its name (qualified by its parents' when the bare name is ambiguous:
// a policy's device_assignment.group_ids are device groups); names not
// listed are kinds themselves (upload_id, job_id, installation_key, ...).
var idKinds = map[string]string{
	"user_id": "user", "member": "user", "idp_user_id": "user", "offline_enrolled_users.id": "user",
	"manager":  "manager",
	"group_id": "group", "groups": "group",
	"device_id":                   "device",
	"device_group_id":             "device_group",
	"device_assignment.group_id":  "device_group",
	"devices_assignment.group_id": "device_group",
	"authn_factor_config_id":      "factor",
	"factor_configs":              "factor",
	"authnfactor_config_id":       "smart_card_factor",
	"template_id":                 "template",
	"notification_template_id":    "template",
	"notification_template.id":    "template",
	"policy_id":                   "policy",
	"conditions.factor_configs":   "condition_config",
}

// hint gives the seeded values a parameter or property takes, by its
// qualified name (a.b.c), or the longest suffix of it that idKinds knows.
func (s *seeded) hint(name string) []any {
	for n := name; ; {
		if k, ok := idKinds[n]; ok {
			return s.values[k]
		}
		if vs, ok := s.values[n]; ok {
			return vs
		}
		_, rest, ok := strings.Cut(n, ".")
		if !ok {
			return nil
		}
		n = rest
	}
}

// protects reports whether tc would remove or change the admin whose token
// the fuzzer holds: a user route naming its id.
func (s *seeded) protects(tc *testCase) bool {
	if s.adminID == "" || !strings.HasPrefix(tc.op.path, "/api/v1/users") || tc.op.method == "GET" {
		return false
	}
	if tc.path["user_id"] == s.adminID {
		return true
	}
	for _, kv := range tc.query {
		for _, v := range strings.Split(kv[1], ",") {
			if strings.TrimSpace(v) == s.adminID {
				return true
			}
		}
	}
	return bytes.Contains(tc.body, []byte(s.adminID))
}

func (s *seeded) add(name string, v any) {
	if v == nil || v == "" {
		return
	}
	if s.values == nil {
		s.values = map[string][]any{}
	}
	s.values[name] = append(s.values[name], v)
}

// call sends a JSON (or, with ctype, raw) body with the admin's token and
// decodes the JSON answer.
func (s *seeded) call(method, path string, body any, ctype string) (int, map[string]any, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd, ctype = bytes.NewReader(j), "application/json"
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if s.device != "" && strings.HasPrefix(path, "/agent/") {
		req.Header.Set("Authorization", s.device)
	} else if !strings.HasPrefix(path, "/agent/") {
		req.Header.Set("Authorization", "Service-oauthtoken "+s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }() // read to the end: a failed close loses nothing
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if resp.StatusCode >= 300 {
		return resp.StatusCode, out, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, truncate(string(raw), 300))
	}
	return resp.StatusCode, out, nil
}

// step runs one seeding call; a failure is a warning (the fuzzer then
// reaches fewer resources), not the end.
func (s *seeded) step(what string, fn func() error) {
	if err := fn(); err != nil {
		s.warnings = append(s.warnings, what+": "+err.Error())
	}
}

// id is data.id (or id, or data[0].id) of an answer, as a string.
func id(m map[string]any) string {
	if d, ok := m["data"].(map[string]any); ok {
		m = d
	} else if l, ok := m["data"].([]any); ok && len(l) > 0 {
		m, _ = l[0].(map[string]any)
	}
	switch v := m["id"].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatInt(int64(v), 10)
	}
	return ""
}

// seed makes a resource of every kind the operations name, so that they
// reach real ones and not only 404s: a second user, a group with the user,
// a device registered through the agent channel with a local account and an
// offline user, a device group, a condition config per family, a policy, a
// CA config, a template, a schedule and a run, an enrollment job, a
// management upload and execution, an event hook (disabled) and a delivery.
func seed(base, token string) *seeded {
	s := &seeded{base: base, token: token}
	s.step("admin id", func() error {
		_, out, err := s.call("GET", "/api/v1/users?filter="+urlQuery(`email eq "`+adminEmail+`"`), nil, "")
		s.adminID = id(out)
		return err
	})
	var userID, userEmail string
	s.step("user", func() error {
		userEmail = "seeded.user@example.com"
		_, out, err := s.call("POST", "/api/v1/users", map[string]any{"firstName": "Seeded", "lastName": "User",
			"email": userEmail, "mobileNumber": "+15550100", "employeeID": "E-1"}, "")
		userID = id(out)
		s.add("user", userID)
		return err
	})
	s.step("manager", func() error {
		_, out, err := s.call("POST", "/api/v1/users", map[string]any{"firstName": "Seeded", "lastName": "Manager",
			"email": "seeded.manager@example.com"}, "")
		s.add("manager", id(out))
		return err
	})
	var groupID string
	s.step("group", func() error {
		_, out, err := s.call("POST", "/api/v1/groups", map[string]any{"name": "Seeded group", "members": []string{userID}}, "")
		groupID = id(out)
		s.add("group", groupID)
		return err
	})
	s.step("dynamic group", func() error {
		_, out, err := s.call("POST", "/api/v1/groups", map[string]any{"name": "Seeded dynamic group", "is_dynamic": true,
			"membership_rule": `lastName eq "User"`}, "")
		s.add("dynamic_group", id(out))
		return err
	})
	var key string
	s.step("installation key", func() error {
		_, out, err := s.call("GET", "/api/v1/protection/agents-info", nil, "")
		if l, ok := out["data"].([]any); ok {
			for _, a := range l {
				if a, ok := a.(map[string]any); ok && a["type"] == "DeviceAgent" {
					key, _ = a["installation_key"].(string)
				}
			}
		}
		s.add("installation_key", key)
		return err
	})
	facts := map[string]any{"name": "SEEDED-PC", "os_type": "Windows", "join_type": "ADJoined",
		"serial_number": "SEED-1", "agent_version": "1.0.0", "ip_address": "10.1.2.3"}
	var deviceID string
	s.step("device", func() error {
		_, out, err := s.call("POST", "/agent/v1/register", map[string]any{"installation_key": key,
			"agent_type": "DeviceAgent", "platform": "windows", "facts": facts}, "")
		if err != nil {
			return err
		}
		deviceID, _ = out["device_id"].(string)
		secret, _ := out["device_secret"].(string)
		s.device = "Device " + deviceID + ":" + secret
		s.add("device", deviceID)
		_, _, err = s.call("POST", "/agent/v1/checkin", map[string]any{"facts": facts,
			"local_accounts":         []any{map[string]any{"user_name": "seeded", "permission_level": "Standard"}},
			"offline_enrolled_users": []any{map[string]any{"id": userID, "display_name": "Seeded User"}}}, "")
		return err
	})
	s.step("local account", func() error {
		_, out, err := s.call("GET", "/api/v1/devices/"+deviceID+"/accounts", nil, "")
		s.add("account_id", id(out))
		return err
	})
	s.step("device group", func() error {
		_, out, err := s.call("POST", "/api/v1/protection/device-groups", map[string]any{"name": "Seeded devices", "device_ids": []string{deviceID}}, "")
		s.add("device_group", id(out))
		return err
	})
	var hookID string
	s.step("event hook", func() error {
		_, out, err := s.call("POST", "/api/v1/event-hooks", map[string]any{"url": "https://hooks.example.com/seeded",
			"event_types": []string{"user.*"}, "enabled": false}, "")
		hookID = id(out)
		s.add("hook_id", hookID)
		return err
	})
	s.step("event hook delivery", func() error {
		_, out, err := s.call("POST", "/api/v1/event-hooks/"+hookID+"/test", nil, "")
		s.add("delivery_id", id(out))
		return err
	})
	for family, body := range map[string]map[string]any{
		"businesshours": {"display_name": "Seeded hours", "business_hours_bitmap": strings.Repeat("1", 168), "timezone": "UTC"},
		"geolocations":  {"display_name": "Seeded countries", "countries": []string{"FR"}, "is_unknown_ip_locations_included": false},
		"ipsources":     {"display_name": "Seeded sources", "is_trusted_source": true, "ip_addresses": "10.0.0.0/8"},
	} {
		s.step("condition config "+family, func() error {
			_, out, err := s.call("POST", "/api/v1/protection/conditionalfactor-configs/"+family, body, "")
			s.add("config_id", id(out))
			s.add("config:"+family, id(out))
			return err
		})
	}
	s.step("policy", func() error {
		_, out, err := s.call("POST", "/api/v1/protection/conditional-access-policies", map[string]any{
			"name": "Seeded policy", "access_type": "allow", "is_enabled": false,
			"user_assignments": map[string]any{"group_ids": []any{groupID}},
			"endpoints_settings": []any{map[string]any{"endpoint": "ComputerDevices", "actions": []string{"InteractiveLogon"},
				"device_assignment": map[string]any{"device_ids": []any{deviceID}}}}}, "")
		s.add("policy", id(out))
		return err
	})
	var factorID, smartCardID string
	s.step("authentication factor configs", func() error {
		_, out, err := s.call("GET", "/api/v1/protection/authnfactor-configs", nil, "")
		if l, ok := out["data"].([]any); ok {
			for _, f := range l {
				f, _ := f.(map[string]any)
				fid := id(map[string]any{"data": f})
				switch f["factor_type"] {
				case "SMART_CARD":
					smartCardID = fid
				case "EMAIL_OTP":
					factorID = fid
				}
				if f["factor_type"] != "SMART_CARD" {
					s.add("factor", fid)
				}
			}
		}
		return err
	})
	s.step("CA config", func() error {
		if smartCardID == "" {
			return fmt.Errorf("no smart card factor config")
		}
		pemCA, err := selfSignedCA()
		if err != nil {
			return err
		}
		body, ctype, err := multipartBody(map[string]string{"certificate_mapping_attribute": "email"}, "ca_file", "ca.pem", pemCA)
		if err != nil {
			return err
		}
		_, out, err := s.call("POST", "/api/v1/protection/authnfactor-configs/"+smartCardID+"/ca-configs", body, ctype)
		s.add("ca_config_id", id(out))
		if err == nil {
			s.add("smart_card_factor", smartCardID)
		}
		return err
	})
	var templateID string
	s.step("template", func() error {
		_, out, err := s.call("POST", "/api/v1/templates/notification", map[string]any{"name": "Seeded template", "module": "Reports",
			"mail": map[string]any{"subject": "Hello", "content": "<p>Hello %first_name%</p>"}}, "")
		templateID = id(out)
		s.add("template", templateID)
		return err
	})
	var scheduleID string
	s.step("schedule", func() error {
		_, out, err := s.call("POST", "/api/v1/protection/quick-enrollment/notification-auto-schedule", map[string]any{
			"name": "Seeded schedule", "groups": []any{json.Number(groupID)}, "notification_template_id": templateID,
			"schedule_settings": map[string]any{"scheduler_interval": "DAILY", "hours": "9", "minutes": "0"}}, "")
		scheduleID = id(out)
		s.add("schedule_id", scheduleID)
		return err
	})
	s.step("schedule run", func() error {
		path := "/api/v1/protection/quick-enrollment/notification-auto-schedule/" + scheduleID
		if _, _, err := s.call("POST", path+"/run-now", nil, ""); err != nil {
			return err
		}
		return poll(func() (bool, error) {
			_, out, err := s.call("GET", path+"/runs", nil, "")
			if rid := id(out); rid != "" {
				s.add("run_id", rid)
				return true, nil
			}
			return false, err
		})
	})
	s.step("enrollment job", func() error {
		body, ctype, err := multipartBody(map[string]string{"factor_configs": factorID}, "file", "users.csv",
			[]byte("Primary Email,Email Address\n"+userEmail+","+userEmail+"\n"))
		if err != nil {
			return err
		}
		_, out, err := s.call("POST", "/api/v1/protection/quick-enrollment/upload-csv", body, ctype)
		s.add("job_id", id(out))
		return err
	})
	var uploadID string
	s.step("management upload", func() error {
		body, ctype, err := multipartBody(nil, "file", "users.csv", []byte("Primary Email\n"+userEmail+"\n"))
		if err != nil {
			return err
		}
		_, out, err := s.call("POST", "/api/v1/management/actions/move-users/uploads", body, ctype)
		uploadID = id(out)
		s.add("upload_id", uploadID)
		return err
	})
	s.step("management execution", func() error {
		_, out, err := s.call("POST", "/api/v1/management/actions/move-users/execute", map[string]any{
			"user_ids": []string{userID}, "target_container": "OU=Seeded,DC=example,DC=com"}, "")
		if eid, ok := out["execution_id"]; ok {
			s.add("execution_id", fmt.Sprint(eid))
		} else {
			s.add("execution_id", id(out))
		}
		return err
	})
	s.add("action_id", "move-users")
	return s
}

// poll calls fn every 200 ms until it says done, for at most 20 s.
func poll(fn func() (bool, error)) error {
	var err error
	for range 100 {
		var done bool
		if done, err = fn(); done {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err == nil {
		return fmt.Errorf("not done in 20 s")
	}
	return fmt.Errorf("not done in 20 s: %w", err)
}

func multipartBody(fields map[string]string, fileField, fileName string, file []byte) ([]byte, string, error) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, k := range sortedKeys(fields) {
		if err := w.WriteField(k, fields[k]); err != nil {
			return nil, "", err
		}
	}
	fw, err := w.CreateFormFile(fileField, fileName)
	if err != nil {
		return nil, "", err
	}
	if _, err = fw.Write(file); err != nil {
		return nil, "", err
	}
	if err = w.Close(); err != nil {
		return nil, "", err
	}
	return b.Bytes(), w.FormDataContentType(), nil
}

// selfSignedCA is a PEM CA certificate valid from an hour ago for a year.
func selfSignedCA() ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Seeded CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(1, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func urlQuery(s string) string {
	return strings.NewReplacer(" ", "%20", `"`, "%22", "@", "%40").Replace(s)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// doomedUser makes a user for a delete-users execution to remove.
func (s *seeded) doomedUser() (email, userID string, err error) {
	s.doomed++
	email = fmt.Sprintf("doomed.%d@example.com", s.doomed)
	if s.base == "" {
		return email, "1", nil
	}
	_, out, err := s.call("POST", "/api/v1/users", map[string]any{"firstName": "Doomed", "lastName": "User", "email": email}, "")
	return email, id(out), err
}
