package api_test

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/activities"
	"iam/api"
	"iam/api/apitest"
	"iam/api/auth"
	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/enrollment"
	"iam/models/identity"
	"iam/models/management"
)

// noChange marks a route that changes nothing although its method is not
// GET (a "what if"): it must record no event at all.
const noChange = ""

// auditRoute is how TestAuditRoutes_EveryChangeRecordsItsEvent drives one
// state-changing route of the route table, and the event it must record.
type auditRoute struct {
	// event is the type of the event the request records (noChange: none).
	event string
	// also are the types of other events the request records with it
	// (the job an execution queues).
	also []string
	// target names the parameter whose value one of the event's targets
	// has as its id: a path parameter, "created" (the id the answer
	// names), "org" (the organization: its settings) or one prepare sets.
	target string
	// prepare makes what the request acts on when the seeded resources
	// will not do (what it deletes, an account in the state it needs) and
	// returns the parameters naming it, over the seeded ones.
	prepare func(f *auditFixture, p map[string]string) map[string]string
	// query is the request's query string, its :parameters filled.
	query string
	// body returns the request's body: a JSON value, or a formBody.
	body func(f *auditFixture, p map[string]string) any
}

// formBody is a multipart body with its content type.
type formBody struct {
	data        []byte
	contentType string
}

// jsonBody is a body that does not depend on the request.
func jsonBody(v any) func(*auditFixture, map[string]string) any {
	return func(*auditFixture, map[string]string) any { return v }
}

// auditRoutes is the valid request of every route of Server.Routes whose
// method is not GET, keyed by method and path as the route table writes
// them, with the event it must record. A route missing here fails the
// test.
var auditRoutes = map[string]auditRoute{
	"DELETE /jobs/:job_id": {event: audit.JobDeleted, target: "job_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"job_id": models.FormatID(f.env.CreateDiagnostic(f.env.Org, activities.DiagnosticParams{Items: 1}).ID)}
		}},

	"POST /users": {event: audit.UserCreated, target: "created", body: func(f *auditFixture, _ map[string]string) any {
		return map[string]any{"firstName": "Created", "email": f.unique("created-%d@example.com")}
	}},
	"DELETE /users":            {event: audit.UserDeleted, target: "user_id", prepare: freshUser, query: "?ids=:user_id"},
	"PATCH /users/:user_id":    {event: audit.UserUpdated, target: "user_id", body: jsonBody(map[string]any{"title": "Auditor"})},
	"DELETE /users/:user_id":   {event: audit.UserDeleted, target: "user_id", prepare: freshUser},
	"POST /groups":             {event: audit.GroupCreated, target: "created", body: uniqueName("name", "Group %d")},
	"DELETE /groups":           {event: audit.GroupDeleted, target: "group_id", prepare: freshGroup, query: "?ids=:group_id"},
	"PATCH /groups/:group_id":  {event: audit.GroupUpdated, target: "group_id", body: jsonBody(map[string]any{"description": "Audited"})},
	"DELETE /groups/:group_id": {event: audit.GroupDeleted, target: "group_id", prepare: freshGroup},
	"POST /groups/:group_id/members": {event: audit.GroupMembersAdded, target: "group_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"member": f.user()}
		},
		body: func(_ *auditFixture, p map[string]string) any {
			return map[string]any{"members": []string{p["member"]}}
		}},
	"DELETE /groups/:group_id/members": {event: audit.GroupMembersRemoved, target: "group_id", query: "?ids=:member",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			member := f.user()
			return map[string]string{"member": member, "group_id": f.group(member)}
		}},

	"POST /protection/quick-enrollment/upload-csv": {event: audit.JobQueued, target: "created",
		body: func(f *auditFixture, _ map[string]string) any {
			otp := factorIDs(f.t, f.env, f.env.Org)[enrollment.FactorEmailOTP]
			data, ct := form(f.t, [][2]string{{"factor_configs", otp}}, "users.csv",
				[]byte("Primary Email,Email Address\n"+f.seed.aud.users[0].Email+",otp@example.com\n"))
			return formBody{data, ct}
		}},
	"POST /protection/quick-enrollment/upload-smartcards": {event: audit.JobQueued, target: "created",
		body: func(f *auditFixture, _ map[string]string) any {
			cert := newCert(f.t, "Card", time.Now().Add(365*24*time.Hour))
			data, ct := form(f.t, [][2]string{{"certificate_filename_pattern", "Primary Email"}}, "cards.zip",
				zipOf(f.t, zipFile{f.seed.aud.users[0].Email + ".cer", cert}))
			return formBody{data, ct}
		}},
	"PUT /protection/quick-enrollment/logon-script-config": {event: audit.LogonScriptUpdated, target: "org",
		body: func(f *auditFixture, _ map[string]string) any {
			var cur struct{ Data map[string]any }
			f.get("/protection/quick-enrollment/logon-script-config", &cur)
			cur.Data["window_title"] = f.unique("Put title %d")
			return cur.Data
		}},
	"PATCH /protection/quick-enrollment/logon-script-config": {event: audit.LogonScriptUpdated, target: "org",
		body: uniqueName("window_title", "Patched title %d")},

	"DELETE /devices/:device_id": {event: audit.DeviceDeleted, target: "device_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"device_id": f.device(nil).id}
		}},
	"POST /devices/:device_id/accounts/:account_id/link": {event: audit.DeviceAccountLinkRequest, target: "account_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			dev := f.device(nil)
			return map[string]string{"device_id": dev.id, "account_id": f.account(dev), "idp_user": f.user()}
		},
		body: func(_ *auditFixture, p map[string]string) any {
			return map[string]any{"permission_level": "Standard", "idp_user_id": p["idp_user"]}
		}},
	"POST /devices/:device_id/accounts/:account_id/cancel-link": {event: audit.DeviceAccountLinkCanceled, target: "account_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string { return f.linkedAccount(false) }},
	"POST /devices/:device_id/accounts/:account_id/unlink": {event: audit.DeviceAccountUnlinked, target: "account_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string { return f.linkedAccount(true) },
		body:    jsonBody(map[string]any{"reason": "audited"})},
	"PATCH /device-account-linking": {event: audit.LinkingSettingsUpdated, target: "org",
		body: func(f *auditFixture, _ map[string]string) any {
			return map[string]any{"link_restricted_local_accounts": []string{f.unique("guest%d")}}
		}},
	"POST /device-account-linking/sync-now": {event: audit.JobQueued, target: "created",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			f.do("PATCH", "/device-account-linking", map[string]any{"is_enabled": true})
			return nil
		}},
	"DELETE /devices/:device_id/offline-enrolled-users": {event: audit.DeviceOfflineUserRemoved, target: "device_id", query: "?ids=111",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"device_id": f.device(offlineUsers).id}
		}},
	"DELETE /devices/:device_id/offline-enrolled-users/:user_id": {event: audit.DeviceOfflineUserRemoved, target: "device_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"device_id": f.device(offlineUsers).id, "user_id": "222"}
		}},
	"POST /protection/agents-info/:agent_type/regenerate-install-key": {event: audit.AgentInstallKeyRegenerate, target: "agent_type"},

	"POST /protection/conditionalfactor-configs/:family": {event: audit.ConditionConfigCreated, target: "created",
		body: func(f *auditFixture, p map[string]string) any {
			return conditionConfigBody(p["family"], f.unique("Config %d"))
		}},
	"DELETE /protection/conditionalfactor-configs/:family": {event: audit.ConditionConfigDeleted, target: "config_id", query: "?ids=:config_id",
		prepare: func(f *auditFixture, p map[string]string) map[string]string {
			return map[string]string{"config_id": f.create("/protection/conditionalfactor-configs/"+p["family"], conditionConfigBody(p["family"], f.unique("Doomed %d")))}
		}},
	"PATCH /protection/conditionalfactor-configs/:family/:config_id": {event: audit.ConditionConfigUpdated, target: "config_id",
		body: uniqueName("display_name", "Renamed %d")},
	"POST /protection/conditional-access-policies": {event: audit.PolicyCreated, target: "created",
		body: func(f *auditFixture, _ map[string]string) any { return f.policyBody() }},
	"PUT /protection/conditional-access-policies/priority": {event: audit.PolicyPriorityChanged, target: "moved",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"moved": f.create("/protection/conditional-access-policies", f.policyBody())}
		},
		body: func(f *auditFixture, _ map[string]string) any {
			var list struct {
				Data []struct {
					ID        string `json:"id"`
					IsDefault bool   `json:"is_default_policy"`
				}
			}
			f.get("/protection/conditional-access-policies?sort=priority&limit=1000", &list)
			var ids []string
			for _, p := range list.Data {
				if !p.IsDefault {
					ids = append(ids, p.ID)
				}
			}
			slices.Reverse(ids)
			return map[string]any{"ids": ids}
		}},
	"PATCH /protection/conditional-access-policies/:policy_id": {event: audit.PolicyUpdated, target: "policy_id",
		body: jsonBody(map[string]any{"description": "Audited"})},
	"DELETE /protection/conditional-access-policies/:policy_id": {event: audit.PolicyDeleted, target: "policy_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"policy_id": f.create("/protection/conditional-access-policies", f.policyBody())}
		}},
	"POST /protection/conditional-access-policies/evaluate": {event: noChange,
		body: func(f *auditFixture, p map[string]string) any {
			return map[string]any{"user_id": p["user_id"], "device_id": p["device_id"], "endpoint": "ComputerDevices", "action": "RDP", "ip": "198.51.100.7"}
		}},

	"POST /event-hooks": {event: audit.EventHookCreated, target: "created",
		body: jsonBody(map[string]any{"url": "https://hooks.example.com/audited", "event_types": []string{"user.*", "job.completed"}, "enabled": false})},
	"PATCH /event-hooks/:hook_id": {event: audit.EventHookUpdated, target: "hook_id",
		body: jsonBody(map[string]any{"description": "Audited"})},
	"DELETE /event-hooks/:hook_id": {event: audit.EventHookDeleted, target: "hook_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"hook_id": f.create("/event-hooks", map[string]any{"url": "https://hooks.example.com/doomed",
				"event_types": []string{"*"}, "enabled": false})}
		}},
	"POST /event-hooks/:hook_id/rotate-secret":                 {event: audit.EventHookSecretRotated, target: "hook_id"},
	"POST /event-hooks/:hook_id/test":                          {event: audit.EventHookTestRequested, target: "hook_id"},
	"POST /event-hooks/:hook_id/deliveries/:delivery_id/retry": {event: audit.EventHookDeliveryRetried, target: "hook_id"},

	"POST /provisioning-tokens": {event: audit.ProvisioningTokenCreated, target: "created", body: uniqueName("name", "SCIM token %d")},
	"DELETE /provisioning-tokens/:token_id": {event: audit.ProvisioningTokenRevoked, target: "token_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"token_id": f.create("/provisioning-tokens", map[string]any{"name": f.unique("Revoked %d")})}
		}},
	"POST /protection/device-groups": {event: audit.DeviceGroupCreated, target: "created", body: uniqueName("name", "Device group %d")},
	"PATCH /protection/device-groups/:device_group_id": {event: audit.DeviceGroupUpdated, target: "device_group_id",
		body: jsonBody(map[string]any{"description": "Audited"})},
	"DELETE /protection/device-groups/:device_group_id": {event: audit.DeviceGroupDeleted, target: "device_group_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"device_group_id": f.create("/protection/device-groups", map[string]any{"name": f.unique("Doomed %d")})}
		}},
	"POST /protection/device-groups/:device_group_id/members": {event: audit.DeviceGroupMembersAdded, target: "device_group_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"device_group_id": f.create("/protection/device-groups", map[string]any{"name": f.unique("Empty %d")})}
		},
		body: func(_ *auditFixture, p map[string]string) any {
			return map[string]any{"device_ids": []string{p["device_id"]}}
		}},
	"DELETE /protection/device-groups/:device_group_id/members": {event: audit.DeviceGroupMembersRemoved, target: "device_group_id", query: "?ids=:device_id",
		prepare: func(f *auditFixture, p map[string]string) map[string]string {
			return map[string]string{"device_group_id": f.create("/protection/device-groups",
				map[string]any{"name": f.unique("Full %d"), "device_ids": []string{p["device_id"]}})}
		}},
	"PATCH /protection/admin-settings": {event: audit.AdminSettingsUpdated, target: "org",
		body: func(f *auditFixture, _ map[string]string) any {
			var cur struct {
				Data struct {
					Passwordless bool `json:"passwordless_enabled_for_nps_vpn"`
				}
			}
			f.get("/protection/admin-settings", &cur)
			return map[string]any{"passwordless_enabled_for_nps_vpn": !cur.Data.Passwordless}
		}},

	"POST /protection/authnfactor-configs/:authnfactor_config_id/ca-configs": {event: audit.CAConfigCreated, target: "created",
		body: func(f *auditFixture, _ map[string]string) any { return f.caBody() }},
	"PATCH /protection/authnfactor-configs/:authnfactor_config_id/ca-configs/:ca_config_id": {event: audit.CAConfigUpdated, target: "ca_config_id",
		body: func(f *auditFixture, _ map[string]string) any {
			data, ct := caForm(f.t, map[string]string{"certificate_mapping_attribute": enrollment.MapDisplayName}, nil)
			return formBody{data, ct}
		}},
	"DELETE /protection/authnfactor-configs/:authnfactor_config_id/ca-configs/:ca_config_id": {event: audit.CAConfigDeleted, target: "ca_config_id",
		prepare: func(f *auditFixture, p map[string]string) map[string]string {
			b := f.caBody()
			return map[string]string{"ca_config_id": createdID(f.t, f.env, "/api/v1/protection/authnfactor-configs/"+p["authnfactor_config_id"]+"/ca-configs",
				f.tok, b.data, b.contentType)}
		}},

	"PUT /management/actions/:action_id/view-columns": {event: audit.ManagementViewColumnsUpdated, target: "action_id",
		body: func(f *auditFixture, p map[string]string) any {
			var cur struct{ Data []string }
			f.get("/management/actions/"+p["action_id"]+"/view-columns", &cur)
			if cols := []string{"email", "department"}; !slices.Equal(cur.Data, cols) {
				return cols
			}
			return []string{"email"}
		}},
	"POST /management/actions/:action_id/execute": {event: audit.ManagementExecutionStarted, also: []string{audit.JobQueued}, target: "created",
		body: func(f *auditFixture, p map[string]string) any {
			body := map[string]any{"user_ids": []string{f.user()}}
			if p["action_id"] == string(management.ActionMoveUsers) {
				body["target_container"] = "OU=Staff,DC=example,DC=com"
			}
			return body
		}},
	"POST /management/actions/:action_id/uploads": {event: audit.ManagementUploadCreated, target: "created",
		body: func(f *auditFixture, _ map[string]string) any { return f.mgmtUpload() }},
	"DELETE /management/actions/:action_id/uploads/:upload_id/data": {event: audit.ManagementUploadDataDeleted, target: "upload_id", query: "?ids=1",
		prepare: func(f *auditFixture, p map[string]string) map[string]string {
			b := f.mgmtUpload()
			return map[string]string{"upload_id": createdID(f.t, f.env, mgmtBase+p["action_id"]+"/uploads", f.tok, b.data, b.contentType)}
		}},
	"POST /management/actions/:action_id/executions/:execution_id/retry": {event: audit.ManagementExecutionRetried, also: []string{audit.JobQueued},
		target: "execution_id",
		prepare: func(f *auditFixture, p map[string]string) map[string]string {
			return map[string]string{"execution_id": f.interruptedExecution(management.MgmtAction(p["action_id"]))}
		}},

	"POST /templates/notification": {event: audit.TemplateCreated, target: "created",
		body: func(f *auditFixture, _ map[string]string) any { return newTemplateBody(f.unique("Template %d")) }},
	"PATCH /templates/notification/:template_id": {event: audit.TemplateUpdated, target: "template_id",
		body: jsonBody(map[string]any{"description": "Audited"})},
	"DELETE /templates/notification/:template_id": {event: audit.TemplateDeleted, target: "template_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"template_id": f.create("/templates/notification", newTemplateBody(f.unique("Doomed %d")))}
		}},
	"POST /protection/quick-enrollment/notification-auto-schedule": {event: audit.ScheduleCreated, target: "created",
		body: func(f *auditFixture, _ map[string]string) any { return f.scheduleBody(true) }},
	"PATCH /protection/quick-enrollment/notification-auto-schedule/:schedule_id": {event: audit.ScheduleUpdated, target: "schedule_id",
		body: jsonBody(map[string]any{"description": "Audited"})},
	"DELETE /protection/quick-enrollment/notification-auto-schedule/:schedule_id": {event: audit.ScheduleDeleted, target: "schedule_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"schedule_id": f.create("/protection/quick-enrollment/notification-auto-schedule", f.scheduleBody(true))}
		}},
	"POST /protection/quick-enrollment/notification-auto-schedule/:schedule_id/pause": {event: audit.SchedulePaused, target: "schedule_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"schedule_id": f.create("/protection/quick-enrollment/notification-auto-schedule", f.scheduleBody(true))}
		}},
	"POST /protection/quick-enrollment/notification-auto-schedule/:schedule_id/resume": {event: audit.ScheduleResumed, target: "schedule_id",
		prepare: func(f *auditFixture, _ map[string]string) map[string]string {
			return map[string]string{"schedule_id": f.create("/protection/quick-enrollment/notification-auto-schedule", f.scheduleBody(false))}
		}},
	"POST /protection/quick-enrollment/notification-auto-schedule/:schedule_id/run-now": {event: audit.ScheduleRunRequested, target: "schedule_id"},
}

// offlineUsers are what a device reports enrolled offline.
var offlineUsers = []map[string]any{{"id": "111", "user_name": "x@example.com"}, {"id": "222"}}

func freshUser(f *auditFixture, _ map[string]string) map[string]string {
	return map[string]string{"user_id": f.user()}
}

func freshGroup(f *auditFixture, _ map[string]string) map[string]string {
	return map[string]string{"group_id": f.group()}
}

// uniqueName is a body of one member, a name of pattern no other request
// of the test sends.
func uniqueName(member, pattern string) func(*auditFixture, map[string]string) any {
	return func(f *auditFixture, _ map[string]string) any { return map[string]any{member: f.unique(pattern)} }
}

func conditionConfigBody(family, name string) map[string]any {
	switch family {
	case "businesshours":
		return map[string]any{"display_name": name, "business_hours_bitmap": officeHours(), "timezone": "UTC"}
	case "geolocations":
		return map[string]any{"display_name": name, "countries": []string{"DE"}}
	default:
		return map[string]any{"display_name": name, "ip_addresses": "198.51.100.0/24"}
	}
}

// auditFixture is what the requests of the test act on and send: the
// seeded resources, and the token of the administrator who acts.
type auditFixture struct {
	t    *testing.T
	env  *apitest.Env
	tok  string
	seed *seeded
	n    int
}

// unique returns pattern with %d replaced by a number no other call gave.
func (f *auditFixture) unique(pattern string) string {
	f.n++
	if !strings.Contains(pattern, "%d") {
		return pattern
	}
	return fmt.Sprintf(pattern, f.n)
}

// do sends a request of the fixture's administrator (path under /api/v1)
// and requires a success.
func (f *auditFixture) do(method, path string, body any) *apitest.Response {
	f.t.Helper()
	resp := f.env.Do(apitest.Request{Method: method, Path: "/api/v1" + path, Token: f.tok, Body: body})
	if resp.Status >= 300 {
		f.t.Fatalf("%s %s: %d %s", method, path, resp.Status, resp.Body)
	}
	return resp
}

// get reads path (under /api/v1) into v.
func (f *auditFixture) get(path string, v any) {
	f.t.Helper()
	f.do("GET", path, nil).JSON(f.t, v)
}

// create posts a JSON body to path (under /api/v1) and returns the id
// of what it created.
func (f *auditFixture) create(path string, body any) string {
	f.t.Helper()
	return createdID(f.t, f.env, "/api/v1"+path, f.tok, body, "")
}

// user creates a user of the organization (through the store) and
// returns its id.
func (f *auditFixture) user() string {
	f.t.Helper()
	u := &identity.User{OrgID: f.env.Org.ID, FirstName: f.unique("User %d"), Email: f.unique("user-%d@example.com"), Status: identity.UserActive}
	if err := f.env.Store.Users.Create(f.t.Context(), u, ""); err != nil {
		f.t.Fatal(err)
	}
	return models.FormatID(u.ID)
}

// group creates a static group of members (through the store) and
// returns its id.
func (f *auditFixture) group(members ...string) string {
	f.t.Helper()
	var ids []int64
	for _, m := range members {
		id, _ := models.ParseID("member", m)
		ids = append(ids, id)
	}
	g := &identity.Group{OrgID: f.env.Org.ID, Name: f.unique("Group %d")}
	if err := f.env.Store.Groups.Create(f.t.Context(), g, ids, nil); err != nil {
		f.t.Fatal(err)
	}
	return models.FormatID(g.ID)
}

// device registers a device of its own with the organization's current
// key (the test regenerates it), reporting one local account, alice, and
// the offline-enrolled users given.
func (f *auditFixture) device(offline []map[string]any) *agentSim {
	f.t.Helper()
	key, err := f.env.Store.Devices.InstallKey(f.t.Context(), f.env.Org.ID, devices.AgentDevice)
	if err != nil {
		f.t.Fatal(err)
	}
	name := f.unique("PC%d")
	dev := registerAgent(f.t, f.env, key, agentFacts(name, "S-"+name))
	report := map[string]any{"local_accounts": localAccounts("alice")}
	if offline != nil {
		report["offline_enrolled_users"] = offline
	}
	dev.checkin(report)
	return dev
}

// account returns the id of the local account alice of dev.
func (f *auditFixture) account(dev *agentSim) string {
	f.t.Helper()
	a := deviceAccounts(f.t, f.env, f.tok, dev.id)["alice"]
	if a.ID == 0 {
		f.t.Fatalf("device %s has no account alice", dev.id)
	}
	return models.FormatID(a.ID)
}

// linkedAccount returns the parameters naming a local account of a
// device of its own whose link to a user is pending, or done (the agent
// acknowledged the link command) when acked.
func (f *auditFixture) linkedAccount(acked bool) map[string]string {
	f.t.Helper()
	ctx := f.t.Context()
	dev := f.device(nil)
	account := f.account(dev)
	devID, _ := models.ParseID("device_id", dev.id)
	accID, _ := models.ParseID("account_id", account)
	userID, _ := models.ParseID("user_id", f.user())
	if _, err := f.env.Store.Devices.Link(ctx, f.env.Org.ID, devID, accID, devices.LinkRequest{UserID: userID, PermissionLevel: "Standard"}); err != nil {
		f.t.Fatal(err)
	}
	if acked {
		report := map[string]any{"local_accounts": localAccounts("alice")}
		ans := dev.checkin(report)
		if len(ans.Commands) != 1 || ans.Commands[0]["type"] != "link" {
			f.t.Fatalf("the device's commands: %+v, want its link", ans.Commands)
		}
		report["acks"] = []map[string]any{{"command_id": ans.Commands[0]["id"], "status": "done"}}
		dev.checkin(report)
	}
	return map[string]string{"device_id": dev.id, "account_id": account}
}

// policyBody is a valid conditional access policy of a name of its own.
func (f *auditFixture) policyBody() map[string]any {
	return map[string]any{"name": f.unique("Policy %d"), "access_type": "allow",
		"access_conditions": map[string]any{"criteria_expression": "1", "conditions": []map[string]any{
			{"sequence_number": 1, "factor_type": "ipaddress", "comparator": "in", "factor_configs": []string{f.seed.configs["ipsources"]}}}},
		"endpoints_settings": []map[string]any{{"endpoint": "IIS"}}}
}

// caBody is the form of a new CA of the smart card factor config.
func (f *auditFixture) caBody() formBody {
	ca := newTestCA(f.t, f.unique("Audit CA %d"), true, time.Now().Add(365*24*time.Hour))
	data, ct := caForm(f.t, map[string]string{"certificate_mapping_attribute": "email"}, ca.der)
	return formBody{data, ct}
}

// mgmtUpload is the form of a management upload of one user.
func (f *auditFixture) mgmtUpload() formBody {
	data, h := csvUpload(f.t, []byte("Primary Email\n"+f.seed.aud.users[0].Email+"\n"), "", false)
	return formBody{data, h.Get("Content-Type")}
}

// scheduleBody is a notification schedule of the seeded group and
// template, of a name of its own.
func (f *auditFixture) scheduleBody(enabled bool) map[string]any {
	body := f.seed.aud.body(f.unique("Schedule %d"))
	body["is_enabled"] = enabled
	return body
}

// interruptedExecution makes an execution of action (through the store)
// whose job was deleted before it ran, which may be retried, and returns
// its id.
func (f *auditFixture) interruptedExecution(action management.MgmtAction) string {
	f.t.Helper()
	ctx := f.t.Context()
	userID, _ := models.ParseID("user_id", f.user())
	n := management.NewExecution{OrgID: f.env.Org.ID, Action: action, Selection: management.Selection{UserIDs: []int64{userID}}, CreatedBy: f.seed.aud.admin.ID}
	if action == management.ActionMoveUsers {
		n.TargetContainer = "OU=Staff,DC=example,DC=com"
	}
	exec, job, err := f.env.Store.Management.CreateExecution(ctx, n)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.env.Store.Jobs.Delete(ctx, f.env.Org.ID, job.ID); err != nil {
		f.t.Fatal(err)
	}
	return models.FormatID(exec.ID)
}

// auditEvents returns the events GET /audit-events lists for query (its
// filter, bounds and order), following next_cursor until a page comes
// back short.
func auditEvents(t *testing.T, env *apitest.Env, tok, query string) []models.EventRecord {
	t.Helper()
	var out []models.EventRecord
	path := "/api/v1/audit-events?limit=1000"
	if query != "" {
		path += "&" + query
	}
	for cursor := ""; ; {
		resp := env.Get(path+cursor, tok)
		if resp.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path+cursor, resp.Status, resp.Body)
		}
		var page struct {
			Data []models.EventRecord
			Meta audit.Meta
		}
		resp.JSON(t, &page)
		out = append(out, page.Data...)
		if page.Meta.IsLast || page.Meta.NextCursor == nil {
			return out
		}
		cursor = "&cursor=" + url.QueryEscape(*page.Meta.NextCursor)
	}
}

// auditFilter is the query string of a filter.
func auditFilter(filter string) string { return "filter=" + url.QueryEscape(filter) }

// TestAuditRoutes_EveryChangeRecordsItsEvent walks the route table: every
// route whose method is not GET is sent a valid request that changes
// state (its path naming real resources: the seeded ones, or ones made
// for it), by a token of an administrator of the organization, and must
// answer a success and record, with the response's X-Request-Id, an event
// of the type auditRoutes names: the administrator as its actor, the
// request's client, outcome SUCCESS and a target naming the resource.
// The events are read through GET /audit-events, which a token without
// svc.audit.* may not read, and which never lists another organization's
// events. A route auditRoutes does not know fails the test.
func TestAuditRoutes_EveryChangeRecordsItsEvent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{AgentRate: 1e6, AgentBurst: 1e6, RegistrationsPerAddress: 1000, RegistrationsPerKey: 1000, Temporal: true})
		ctx := t.Context()
		org := models.FormatID(env.Org.ID)

		// The actor: an administrator of the organization holding every
		// scope of the routes (svc.audit.* among them).
		admin := &identity.User{OrgID: env.Org.ID, FirstName: "Audit", LastName: "Admin", Email: "audit-admin@example.com", Status: identity.UserActive}
		if err := env.Store.Users.Create(ctx, admin, ""); err != nil {
			t.Fatal(err)
		}
		var scopes, notAudit []string
		for _, r := range env.Server.Routes() {
			scopes = append(scopes, r.Scopes...)
		}
		slices.Sort(scopes)
		scopes = slices.Compact(scopes)
		for _, s := range scopes {
			if !strings.HasPrefix(s, "svc.audit.") {
				notAudit = append(notAudit, s)
			}
		}
		actor := models.Actor{Type: models.ActorUser, ID: models.FormatID(admin.ID), DisplayName: "Audit Admin"}
		tok := env.Tokens.Mint(auth.Principal{UserID: admin.ID, OrgID: env.Org.ID, Name: actor.DisplayName, Scopes: scopes})
		auditTok := env.Token(env.Org, "svc.audit.READ")

		key, err := env.Store.Devices.InstallKey(ctx, env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		dev := registerAgent(t, env, key, agentFacts("PC1", "S1"))
		f := &auditFixture{t: t, env: env, tok: tok, seed: seedResources(t, env, tok, dev)}

		const userAgent = "audit-routes-test/1.0"
		walked := map[string]bool{}
		var requestIDs []string
		for _, r := range env.Server.Routes() {
			if r.Method == http.MethodGet {
				continue
			}
			key := r.Method + " " + r.Path
			c, ok := auditRoutes[key]
			if !ok {
				t.Errorf("%s changes state, and auditRoutes has no entry for it: add its valid body and the audit event it records", key)
				continue
			}
			walked[key] = true
			for _, set := range f.seed.params.sets(r.Path) {
				p := maps.Clone(set)
				p["org"] = org
				if c.prepare != nil {
					maps.Copy(p, c.prepare(f, p))
				}
				path := "/api/v1" + fillParams(t, r.Path+c.query, p)
				req := apitest.Request{Method: r.Method, Path: path, Token: tok, Header: http.Header{"User-Agent": {userAgent}}}
				if c.body != nil {
					switch b := c.body(f, p).(type) {
					case formBody:
						req.Body = b.data
						req.Header.Set("Content-Type", b.contentType)
					default:
						req.Body = b
					}
				}
				resp := env.Do(req)
				if resp.Status < 200 || resp.Status >= 300 {
					t.Errorf("%s %s: %d %s, want a success", r.Method, path, resp.Status, resp.Body)
					continue
				}
				rid := resp.Header.Get(api.RequestIDHeader)
				if rid == "" {
					t.Errorf("%s %s: no %s in the answer", r.Method, path, api.RequestIDHeader)
					continue
				}
				requestIDs = append(requestIDs, rid)
				p["created"] = createdIn(resp)
				events := auditEvents(t, env, auditTok, auditFilter(`request_id eq "`+rid+`"`))
				checkRequestEvents(t, r.Method+" "+path, c, p, events, rid, actor, userAgent)
			}
		}
		t.Logf("%d requests to %d state-changing routes", len(requestIDs), len(walked))
		for key := range auditRoutes {
			if !walked[key] {
				t.Errorf("auditRoutes has %s, which is no route of the table (or a GET)", key)
			}
		}
		if len(walked) < 50 {
			t.Errorf("only %d state-changing routes walked", len(walked))
		}

		// A token without svc.audit.* (holding every other scope) may not
		// read the log.
		if resp := env.Get("/api/v1/audit-events", env.Token(env.Org, notAudit...)); resp.Status != http.StatusForbidden {
			t.Errorf("GET /audit-events without svc.audit.*: %d %s, want 403", resp.Status, resp.Body)
		}

		// Another organization's log holds its own events only, and ours
		// none of its.
		other := env.NewOrg("Other organization")
		otherEvents := auditEvents(t, env, env.Token(other, "svc.audit.ALL"), "")
		if len(otherEvents) == 0 {
			t.Error("the other organization's log is empty: its creation recorded nothing")
		}
		ours := map[string]bool{}
		for _, rid := range requestIDs {
			ours[rid] = true
		}
		for _, e := range otherEvents {
			if e.OrgID != models.FormatID(other.ID) || ours[e.RequestID] {
				t.Errorf("the other organization lists event %s of organization %s, request %s", e.ID, e.OrgID, e.RequestID)
			}
		}
		for _, e := range auditEvents(t, env, auditTok, "") {
			if e.OrgID != org {
				t.Errorf("the organization lists event %s of organization %s", e.ID, e.OrgID)
			}
		}
	})
}

// createdIn returns the id of what an answer says was created (an
// execution's under data.execution_id); "" when it names none.
func createdIn(resp *apitest.Response) string {
	if id := answeredID(resp); id != "" {
		return id
	}
	var exec struct {
		Data struct {
			ExecutionID json.Number `json:"execution_id"`
		} `json:"data"`
	}
	_ = json.Unmarshal(resp.Body, &exec) // none: ""
	return exec.Data.ExecutionID.String()
}

// checkRequestEvents checks the events one request recorded against what
// its route c says.
func checkRequestEvents(t *testing.T, what string, c auditRoute, p map[string]string, events []models.EventRecord, rid string, actor models.Actor, userAgent string) {
	t.Helper()
	if c.event == noChange {
		for _, e := range events {
			t.Errorf("%s changes nothing, yet recorded %s", what, e.EventType)
		}
		return
	}
	want := p[c.target]
	if want == "" {
		t.Errorf("%s: no value of %q, the target its event must name", what, c.target)
	}
	var types []string
	found, targeted := false, false
	for _, e := range events {
		types = append(types, e.EventType)
		if e.RequestID != rid {
			t.Errorf("%s: GET /audit-events?filter=request_id eq %q listed event %s of request %q", what, rid, e.ID, e.RequestID)
		}
		if e.EventType != c.event {
			continue
		}
		found = true
		if e.Actor != actor {
			t.Errorf("%s: %s has actor %+v, want %+v", what, e.EventType, e.Actor, actor)
		}
		if e.Outcome.Result != models.ResultSuccess {
			t.Errorf("%s: %s has outcome %+v, want SUCCESS", what, e.EventType, e.Outcome)
		}
		if e.Client.UserAgent != userAgent || e.Client.IPAddress == "" {
			t.Errorf("%s: %s has client %+v, want the request's (user agent %q)", what, e.EventType, e.Client, userAgent)
		}
		if e.Published == "" || e.Sequence < 1 || e.ID == "" {
			t.Errorf("%s: %s has id %q, sequence %d, published %q", what, e.EventType, e.ID, e.Sequence, e.Published)
		}
		for _, target := range e.Targets {
			targeted = targeted || target.ID == want
		}
	}
	for _, typ := range c.also {
		if !slices.Contains(types, typ) {
			t.Errorf("%s recorded no %s event (it recorded %v)", what, typ, types)
		}
	}
	switch {
	case !found:
		t.Errorf("%s recorded no %s event (it recorded %v): a change without its event", what, c.event, types)
	case !targeted:
		t.Errorf("%s: its %s event names no target %q (%s)", what, c.event, want, c.target)
	}
}

// TestAuditEvents_API: GET /audit-events bounds by since and until,
// orders DESCENDING, pages by limit and cursor (refusing a bad order or
// cursor), exports every event as NDJSON; GET /audit-events/{id} answers
// an event of the organization only; GET /audit-digests lists none before
// a seal and the seal after; the public key is served only when the
// service has one.
func TestAuditEvents_API(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		utok := env.Token(env.Org, "svc.user.ALL")
		tok := env.Token(env.Org, "svc.audit.READ")
		for i := range 5 {
			createdID(t, env, "/api/v1/users", utok, map[string]any{"firstName": "Eve", "email": fmt.Sprintf("eve%d@example.com", i)}, "")
		}
		created := auditFilter(`event_type eq "user.created"`)
		all := auditEvents(t, env, tok, created)
		if len(all) != 5 {
			t.Fatalf("%d user.created events, want 5", len(all))
		}
		for i := 1; i < len(all); i++ {
			if all[i].Sequence <= all[i-1].Sequence {
				t.Errorf("ascending: sequence %d after %d", all[i].Sequence, all[i-1].Sequence)
			}
		}
		seqs := func(events []models.EventRecord) []int64 {
			var out []int64
			for _, e := range events {
				out = append(out, e.Sequence)
			}
			return out
		}

		// since is inclusive, until exclusive.
		since, until := url.QueryEscape(all[1].Published), url.QueryEscape(all[3].Published)
		if got := seqs(auditEvents(t, env, tok, created+"&since="+since+"&until="+until)); !slices.Equal(got, seqs(all[1:3])) {
			t.Errorf("since %s until %s: %v, want %v", all[1].Published, all[3].Published, got, seqs(all[1:3]))
		}
		if got := seqs(auditEvents(t, env, tok, created+"&since="+since)); !slices.Equal(got, seqs(all[1:])) {
			t.Errorf("since %s: %v, want %v", all[1].Published, got, seqs(all[1:]))
		}
		wantError(t, env.Get("/api/v1/audit-events?since=yesterday", tok), 400, "00000107", "RFC 3339")

		// DESCENDING: the newest first; any other order is refused.
		desc := seqs(auditEvents(t, env, tok, created+"&sort_order=DESCENDING"))
		asc := seqs(all)
		slices.Reverse(asc)
		if !slices.Equal(desc, asc) {
			t.Errorf("DESCENDING: %v, want %v", desc, asc)
		}
		wantError(t, env.Get("/api/v1/audit-events?sort_order=SIDEWAYS", tok), 400, "00000107", "ASCENDING or DESCENDING")

		// limit pages; following next_cursor lists each event once, in
		// order, and past the last page it goes on with the events
		// committed since (a tail). A cursor that is not one, or is
		// another query's, is refused.
		var paged []models.EventRecord
		var first, cursor string
		for pages := 1; ; pages++ {
			var page struct {
				Data []models.EventRecord
				Meta audit.Meta
			}
			resp := env.Get("/api/v1/audit-events?limit=2&"+created+cursor, tok)
			resp.JSON(t, &page)
			if resp.Status != 200 || len(page.Data) > 2 || page.Meta.Limit != 2 || page.Meta.NextCursor == nil ||
				(cursor == "") != (page.Meta.Cursor == nil) || pages > 3 {
				t.Fatalf("page %d of 2 events: %d %s", pages, resp.Status, resp.Body)
			}
			paged = append(paged, page.Data...)
			cursor = "&cursor=" + url.QueryEscape(*page.Meta.NextCursor)
			if first == "" {
				first = *page.Meta.NextCursor
			}
			if page.Meta.IsLast {
				break
			}
		}
		if got, want := seqs(paged), seqs(all); !slices.Equal(got, want) {
			t.Errorf("pages of 2: %v, want %v", got, want)
		}
		createdID(t, env, "/api/v1/users", utok, map[string]any{"firstName": "Late", "email": "late@example.com"}, "")
		tail := auditEvents(t, env, tok, created+cursor)
		if len(tail) != 1 || tail[0].Targets[0].DisplayName != "Late" {
			t.Errorf("past the last page: %+v, want the one user created since", tail)
		}
		wantError(t, env.Get("/api/v1/audit-events?cursor=nonsense", tok), 400, "00000107", "cursor")
		wantError(t, env.Get("/api/v1/audit-events?limit=2&sort_order=DESCENDING&"+created+"&cursor="+url.QueryEscape(first), tok),
			400, "00000107", "cursor")

		// The export: every event of the organization, one JSON document
		// a line, as the pages list them.
		every := auditEvents(t, env, tok, "")
		resp := env.Do(apitest.Request{Method: "GET", Path: "/api/v1/audit-events", Token: tok, Header: http.Header{"Accept": {"application/x-ndjson"}}})
		if resp.Status != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("export: %d %q", resp.Status, resp.Header.Get("Content-Type"))
		}
		var exported []string
		lines := bufio.NewScanner(bytes.NewReader(resp.Body))
		for lines.Scan() {
			var e models.EventRecord
			if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
				t.Fatalf("export line %q: %v", lines.Text(), err)
			}
			exported = append(exported, e.ID)
		}
		var listed []string
		for _, e := range every {
			listed = append(listed, e.ID)
		}
		if !slices.Equal(exported, listed) || len(listed) < 6 || !bytes.HasSuffix(resp.Body, []byte("\n")) {
			t.Errorf("export holds %v, the pages %v", exported, listed)
		}

		// One event, as listed; another organization's is not found.
		resp = env.Get("/api/v1/audit-events/"+all[0].ID, tok)
		var one models.EventRecord
		resp.JSON(t, &one)
		if resp.Status != 200 || one.ID != all[0].ID || one.EventType != audit.UserCreated || one.Sequence != all[0].Sequence {
			t.Errorf("GET one event: %d %s", resp.Status, resp.Body)
		}
		other := env.NewOrg("Other organization")
		theirs := auditEvents(t, env, env.Token(other, "svc.audit.ALL"), "")
		if len(theirs) == 0 {
			t.Fatal("the other organization has no event")
		}
		wantError(t, env.Get("/api/v1/audit-events/"+theirs[0].ID, tok), 404, "00000103", "")
		wantError(t, env.Get("/api/v1/audit-events/123", tok), 404, "00000103", "")

		// No digest before a seal; no public key without a signing key.
		resp = env.Get("/api/v1/audit-digests", tok)
		if resp.Status != 200 || string(resp.Body) != `{"data":[],"meta":{"start_index":0,"limit":100,"total_no_of_objects":0}}` {
			t.Errorf("digests before a seal: %d %s", resp.Status, resp.Body)
		}
		resp = env.Get("/api/v1/audit-digests/public-key", tok)
		if resp.Status != 404 || resp.ErrorBody(t).Title != "Audit Signing Key Not Found" {
			t.Errorf("public key without one: %d %s", resp.Status, resp.Body)
		}

		t.Run("signing key", func(t *testing.T) {
			signer, err := audit.NewSigner(bytes.Repeat([]byte{7}, ed25519.SeedSize))
			if err != nil {
				t.Fatal(err)
			}
			pub := signer.PublicKey()
			env := apitest.New(t, db, apitest.Options{AuditSigner: signer})
			tok := env.Token(env.Org, "svc.audit.ALL")
			createdID(t, env, "/api/v1/users", env.Token(env.Org, "svc.user.CREATE"), map[string]any{"firstName": "Sam", "email": "sam@example.com"}, "")

			resp := env.Get("/api/v1/audit-digests/public-key", tok)
			var key struct {
				Algorithm string `json:"algorithm"`
				KeyID     string `json:"key_id"`
				PublicKey string `json:"public_key"`
				PEM       string `json:"pem"`
			}
			resp.JSON(t, &key)
			raw, _ := base64.StdEncoding.DecodeString(key.PublicKey)
			if resp.Status != 200 || key.Algorithm != "Ed25519" || key.KeyID != audit.KeyID(pub) || !bytes.Equal(raw, pub) {
				t.Errorf("public key: %d %s", resp.Status, resp.Body)
			}
			block, _ := pem.Decode([]byte(key.PEM))
			if block == nil || block.Type != "PUBLIC KEY" {
				t.Fatalf("pem %q", key.PEM)
			}
			parsed, err := x509.ParsePKIXPublicKey(block.Bytes)
			if k, ok := parsed.(ed25519.PublicKey); err != nil || !ok || !k.Equal(pub) {
				t.Errorf("the PEM holds %T %v (%v), want the key", parsed, parsed, err)
			}

			// A seal lists its digest, signed by the key.
			events := auditEvents(t, env, tok, "")
			if _, err := env.Store.Digests.Seal(t.Context(), env.Org.ID, signer, time.Now().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			var digests struct {
				Data []struct {
					Number     int64  `json:"number"`
					EventCount int64  `json:"event_count"`
					KeyID      string `json:"key_id"`
					Signature  string `json:"signature"`
				}
				Meta struct {
					Total int64 `json:"total_no_of_objects"`
				}
			}
			resp = env.Get("/api/v1/audit-digests", tok)
			resp.JSON(t, &digests)
			if resp.Status != 200 || len(digests.Data) != 1 || digests.Meta.Total != 1 || digests.Data[0].Number != 1 ||
				digests.Data[0].EventCount != int64(len(events)) || digests.Data[0].KeyID != audit.KeyID(pub) || digests.Data[0].Signature == "" {
				t.Errorf("digests after a seal of %d events: %d %s", len(events), resp.Status, resp.Body)
			}
		})
	})
}
