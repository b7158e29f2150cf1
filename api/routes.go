package api

import (
	"github.com/gin-gonic/gin"

	"iam/api/scim"
)

// Route is one /api/v1 route: its method and path (relative to /api/v1), the
// scopes of which the token must hold any one, and its handler: a
// func(*gin.Context) error wrapped by handle, which answers the error it
// returns. MaxBody overrides the default body limit (uploads). Idempotent
// routes (those that start jobs) honour an Idempotency-Key header
// (idempotency.go): the key's first answer is replayed for 24 hours.
type Route struct {
	Method     string
	Path       string
	Scopes     []string
	Handler    gin.HandlerFunc
	MaxBody    int64
	Idempotent bool
}

// Routes lists the whole /api/v1 surface. Every route sits behind one
// authentication middleware and its own scope check (server.go).
func (s *Server) Routes() []Route {
	return []Route{
		// Jobs (spec 4.6).
		{Method: "GET", Path: "/jobs", Scopes: Scopes("job", "READ", "ALL"), Handler: handle(s.listJobs)},
		{Method: "GET", Path: "/jobs/:job_id", Scopes: Scopes("job", "READ", "ALL"), Handler: handle(s.getJob)},
		{Method: "GET", Path: "/jobs/:job_id/results", Scopes: Scopes("job", "READ", "ALL"), Handler: handle(s.listJobResults)},
		{Method: "GET", Path: "/jobs/:job_id/events", Scopes: Scopes("job", "READ", "ALL"), Handler: handle(s.jobEvents)},
		{Method: "DELETE", Path: "/jobs/:job_id", Scopes: Scopes("job", "DELETE", "ALL"), Handler: handle(s.deleteJob)},

		// The audit log (docs/audit.md): every change's event, in commit
		// order, and the signed digests that seal them.
		{Method: "GET", Path: "/audit-events", Scopes: Scopes("audit", "READ", "ALL"), Handler: handle(s.listAuditEvents)},
		{Method: "GET", Path: "/audit-events/:event_id", Scopes: Scopes("audit", "READ", "ALL"), Handler: handle(s.getAuditEvent)},
		{Method: "GET", Path: "/audit-digests", Scopes: Scopes("audit", "READ", "ALL"), Handler: handle(s.listAuditDigests)},
		{Method: "GET", Path: "/audit-digests/public-key", Scopes: Scopes("audit", "READ", "ALL"), Handler: handle(s.auditPublicKey)},

		// Event hooks (docs/event-hooks.md): the audit events pushed, signed,
		// to an organization's endpoints; their deliveries and retries.
		{Method: "GET", Path: eventHooksPath, Scopes: Scopes("event_hook", "READ", "ALL"), Handler: handle(s.listEventHooks)},
		{Method: "POST", Path: eventHooksPath, Scopes: Scopes("event_hook", "CREATE", "WRITE", "ALL"), Handler: handle(s.createEventHook), MaxBody: eventHookMaxBody},
		{Method: "GET", Path: eventHooksPath + "/:hook_id", Scopes: Scopes("event_hook", "READ", "ALL"), Handler: handle(s.getEventHook)},
		{Method: "PATCH", Path: eventHooksPath + "/:hook_id", Scopes: Scopes("event_hook", "UPDATE", "WRITE", "ALL"), Handler: handle(s.updateEventHook), MaxBody: eventHookMaxBody},
		{Method: "DELETE", Path: eventHooksPath + "/:hook_id", Scopes: Scopes("event_hook", "DELETE", "WRITE", "ALL"), Handler: handle(s.deleteEventHook)},
		{Method: "POST", Path: eventHooksPath + "/:hook_id/rotate-secret", Scopes: Scopes("event_hook", "UPDATE", "WRITE", "ALL"), Handler: handle(s.rotateEventHookSecret)},
		{Method: "POST", Path: eventHooksPath + "/:hook_id/test", Scopes: Scopes("event_hook", "UPDATE", "WRITE", "ALL"), Handler: handle(s.testEventHook)},
		{Method: "GET", Path: eventHooksPath + "/:hook_id/deliveries", Scopes: Scopes("event_hook", "READ", "ALL"), Handler: handle(s.listEventHookDeliveries)},
		{Method: "POST", Path: eventHooksPath + "/:hook_id/deliveries/:delivery_id/retry", Scopes: Scopes("event_hook", "UPDATE", "WRITE", "ALL"), Handler: handle(s.retryEventHookDelivery)},

		// Users and groups (spec 4.1). WRITE covers creating, updating and
		// deleting; group members change under UPDATE.
		{Method: "GET", Path: "/users", Scopes: Scopes("user", "READ", "ALL"), Handler: handle(s.listUsers)},
		{Method: "POST", Path: "/users", Scopes: Scopes("user", "CREATE", "WRITE", "ALL"), Handler: handle(s.createUser)},
		{Method: "DELETE", Path: "/users", Scopes: Scopes("user", "DELETE", "WRITE", "ALL"), Handler: handle(s.deleteUsers)},
		{Method: "GET", Path: "/users/:user_id", Scopes: Scopes("user", "READ", "ALL"), Handler: handle(s.getUser)},
		{Method: "PATCH", Path: "/users/:user_id", Scopes: Scopes("user", "UPDATE", "WRITE", "ALL"), Handler: handle(s.updateUser)},
		{Method: "DELETE", Path: "/users/:user_id", Scopes: Scopes("user", "DELETE", "WRITE", "ALL"), Handler: handle(s.deleteUser)},
		{Method: "GET", Path: "/groups", Scopes: Scopes("group", "READ", "ALL"), Handler: handle(s.listGroups)},
		{Method: "POST", Path: "/groups", Scopes: Scopes("group", "CREATE", "WRITE", "ALL"), Handler: handle(s.createGroup), Idempotent: true},
		{Method: "DELETE", Path: "/groups", Scopes: Scopes("group", "DELETE", "WRITE", "ALL"), Handler: handle(s.deleteGroups)},
		{Method: "GET", Path: "/groups/:group_id", Scopes: Scopes("group", "READ", "ALL"), Handler: handle(s.getGroup)},
		{Method: "PATCH", Path: "/groups/:group_id", Scopes: Scopes("group", "UPDATE", "WRITE", "ALL"), Handler: handle(s.updateGroup)},
		{Method: "DELETE", Path: "/groups/:group_id", Scopes: Scopes("group", "DELETE", "WRITE", "ALL"), Handler: handle(s.deleteGroup)},
		{Method: "GET", Path: "/groups/:group_id/members", Scopes: Scopes("group", "READ", "ALL"), Handler: handle(s.groupMembers)},
		{Method: "POST", Path: "/groups/:group_id/members", Scopes: Scopes("group", "UPDATE", "WRITE", "ALL"), Handler: handle(s.addGroupMembers)},
		{Method: "DELETE", Path: "/groups/:group_id/members", Scopes: Scopes("group", "UPDATE", "WRITE", "ALL"), Handler: handle(s.removeGroupMembers)},

		// SCIM provisioning tokens (docs/scim.md): bearer tokens of the
		// organization for /scim/v2, shown once, stored hashed.
		{Method: "GET", Path: "/provisioning-tokens", Scopes: Scopes("provisioning_token", "READ", "ALL"), Handler: handle(s.listProvisioningTokens)},
		{Method: "POST", Path: "/provisioning-tokens", Scopes: Scopes("provisioning_token", "CREATE", "WRITE", "ALL"), Handler: handle(s.createProvisioningToken)},
		{Method: "DELETE", Path: "/provisioning-tokens/:token_id", Scopes: Scopes("provisioning_token", "DELETE", "WRITE", "ALL"), Handler: handle(s.revokeProvisioningToken)},

		// Authentication factor configs and quick enrollment (spec 4.3, 4.4).
		{Method: "GET", Path: "/protection/authnfactor-configs", Scopes: append(Scopes("auth", "READ", "ALL"), Scopes("quick_enrollment", "READ", "ALL")...), Handler: handle(s.listFactorConfigs)},
		{Method: "GET", Path: "/protection/quick-enrollment/sample-csv", Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: handle(s.sampleCSV)},
		{Method: "POST", Path: "/protection/quick-enrollment/upload-csv", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "CREATE"), Handler: handle(s.uploadCSV), MaxBody: s.cfg.UploadMaxBytes, Idempotent: true},
		{Method: "POST", Path: "/protection/quick-enrollment/upload-smartcards", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "CREATE"), Handler: handle(s.uploadSmartCards), MaxBody: s.cfg.UploadMaxBytes, Idempotent: true},
		{Method: "GET", Path: "/protection/quick-enrollment/logon-script-config", Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: handle(s.getLogonScript)},
		{Method: "PUT", Path: "/protection/quick-enrollment/logon-script-config", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "UPDATE"), Handler: handle(s.putLogonScript)},
		{Method: "PATCH", Path: "/protection/quick-enrollment/logon-script-config", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "UPDATE"), Handler: handle(s.patchLogonScript)},

		// Devices, local accounts, account linking and offline users (spec
		// 4.2); agents and their installation keys (spec 4.3).
		{Method: "GET", Path: "/devices", Scopes: Scopes("device", "READ", "ALL"), Handler: handle(s.listDevices)},
		{Method: "GET", Path: "/devices/:device_id", Scopes: Scopes("device", "READ", "ALL"), Handler: handle(s.getDevice)},
		{Method: "DELETE", Path: "/devices/:device_id", Scopes: Scopes("device", "DELETE", "WRITE", "ALL"), Handler: handle(s.deleteDevice)},
		{Method: "GET", Path: "/devices/:device_id/accounts", Scopes: Scopes("device", "READ", "ALL"), Handler: handle(s.listAccounts)},
		{Method: "POST", Path: "/devices/:device_id/accounts/:account_id/link", Scopes: Scopes("device", "WRITE", "ALL"), Handler: handle(s.linkAccount)},
		{Method: "POST", Path: "/devices/:device_id/accounts/:account_id/cancel-link", Scopes: Scopes("device", "WRITE", "ALL"), Handler: handle(s.cancelLink)},
		{Method: "POST", Path: "/devices/:device_id/accounts/:account_id/unlink", Scopes: Scopes("device", "WRITE", "ALL"), Handler: handle(s.unlinkAccount)},
		{Method: "GET", Path: "/device-account-linking", Scopes: Scopes("device", "READ", "ALL"), Handler: handle(s.getLinkingSettings)},
		{Method: "PATCH", Path: "/device-account-linking", Scopes: Scopes("device", "WRITE", "ALL"), Handler: handle(s.patchLinkingSettings)},
		{Method: "GET", Path: "/device-account-linking/history", Scopes: Scopes("device", "READ", "ALL"), Handler: handle(s.linkHistory)},
		{Method: "POST", Path: "/device-account-linking/sync-now", Scopes: Scopes("device", "WRITE", "ALL"), Handler: handle(s.syncNow), Idempotent: true},
		{Method: "GET", Path: "/devices/:device_id/offline-enrolled-users", Scopes: Scopes("device", "READ", "ALL"), Handler: handle(s.listOfflineUsers)},
		{Method: "DELETE", Path: "/devices/:device_id/offline-enrolled-users", Scopes: Scopes("device", "WRITE", "DELETE", "ALL"), Handler: handle(s.deleteOfflineUsers)},
		{Method: "DELETE", Path: "/devices/:device_id/offline-enrolled-users/:user_id", Scopes: Scopes("device", "WRITE", "DELETE", "ALL"), Handler: handle(s.deleteOfflineUser)},
		{Method: "GET", Path: "/protection/agents-info", Scopes: Scopes("conditional_access_policy", "READ", "ALL"), Handler: handle(s.agentsInfo)},
		{Method: "POST", Path: "/protection/agents-info/:agent_type/regenerate-install-key", Scopes: Scopes("conditional_access_policy", "WRITE", "ALL"), Handler: handle(s.regenerateInstallKey)},
		{Method: "GET", Path: "/protection/agents-info/:agent_type/download", Scopes: Scopes("conditional_access_policy", "READ", "ALL"), Handler: handle(s.downloadAgent)},

		// Condition configs and conditional access policies (spec 4.3). The
		// policy list also accepts the notification_template scopes the spec
		// lists for it (docs/protection.md).
		{Method: "GET", Path: configsPath + "/:family", Scopes: Scopes("conditional_factor_config", "READ", "ALL"), Handler: handle(s.listConfigs)},
		{Method: "POST", Path: configsPath + "/:family", Scopes: Scopes("conditional_factor_config", "CREATE", "ALL"), Handler: handle(s.createConfig)},
		{Method: "DELETE", Path: configsPath + "/:family", Scopes: Scopes("conditional_factor_config", "DELETE", "ALL"), Handler: handle(s.deleteConfigs)},
		{Method: "GET", Path: configsPath + "/:family/:config_id", Scopes: Scopes("conditional_factor_config", "READ", "ALL"), Handler: handle(s.getConfig)},
		{Method: "PATCH", Path: configsPath + "/:family/:config_id", Scopes: Scopes("conditional_factor_config", "UPDATE", "WRITE", "ALL"), Handler: handle(s.updateConfig)},
		{Method: "GET", Path: policiesPath, Scopes: append(Scopes("conditional_access_policy", "READ", "ALL"), Scopes("notification_template", "READ", "ALL")...), Handler: handle(s.listPolicies)},
		{Method: "POST", Path: policiesPath, Scopes: Scopes("conditional_access_policy", "CREATE", "ALL"), Handler: handle(s.createPolicy)},
		{Method: "PUT", Path: policiesPath + "/priority", Scopes: Scopes("conditional_access_policy", "UPDATE", "WRITE", "ALL"), Handler: handle(s.reorderPolicies)},
		{Method: "GET", Path: policiesPath + "/:policy_id", Scopes: Scopes("conditional_access_policy", "READ", "ALL"), Handler: handle(s.getPolicy)},
		{Method: "PATCH", Path: policiesPath + "/:policy_id", Scopes: Scopes("conditional_access_policy", "UPDATE", "WRITE", "ALL"), Handler: handle(s.updatePolicy)},
		{Method: "DELETE", Path: policiesPath + "/:policy_id", Scopes: Scopes("conditional_access_policy", "DELETE", "WRITE", "ALL"), Handler: handle(s.deletePolicy)},
		{Method: "GET", Path: policiesPath + "/:policy_id/user-assignment-users", Scopes: Scopes("conditional_access_policy", "READ", "ALL"), Handler: handle(s.policyUsers)},
		{Method: "GET", Path: policiesPath + "/:policy_id/user-assignment-groups", Scopes: Scopes("conditional_access_policy", "READ", "ALL"), Handler: handle(s.policyGroups)},
		{Method: "GET", Path: policiesPath + "/:policy_id/protected-devices", Scopes: Scopes("conditional_access_policy", "READ", "ALL"), Handler: handle(s.policyDevices)},

		// Device groups: named static sets of devices that policies and the
		// offline MFA settings name (docs/protection.md).
		{Method: "GET", Path: deviceGroupsPath, Scopes: Scopes("conditional_access_policy", "READ", "ALL"), Handler: handle(s.listDeviceGroups)},
		{Method: "POST", Path: deviceGroupsPath, Scopes: Scopes("conditional_access_policy", "CREATE", "WRITE", "ALL"), Handler: handle(s.createDeviceGroup)},
		{Method: "GET", Path: deviceGroupsPath + "/:device_group_id", Scopes: Scopes("conditional_access_policy", "READ", "ALL"), Handler: handle(s.getDeviceGroup)},
		{Method: "PATCH", Path: deviceGroupsPath + "/:device_group_id", Scopes: Scopes("conditional_access_policy", "UPDATE", "WRITE", "ALL"), Handler: handle(s.updateDeviceGroup)},
		{Method: "DELETE", Path: deviceGroupsPath + "/:device_group_id", Scopes: Scopes("conditional_access_policy", "DELETE", "WRITE", "ALL"), Handler: handle(s.deleteDeviceGroup)},
		{Method: "GET", Path: deviceGroupsPath + "/:device_group_id/members", Scopes: Scopes("conditional_access_policy", "READ", "ALL"), Handler: handle(s.deviceGroupMembers)},
		{Method: "POST", Path: deviceGroupsPath + "/:device_group_id/members", Scopes: Scopes("conditional_access_policy", "UPDATE", "WRITE", "ALL"), Handler: handle(s.addDeviceGroupMembers)},
		{Method: "DELETE", Path: deviceGroupsPath + "/:device_group_id/members", Scopes: Scopes("conditional_access_policy", "UPDATE", "WRITE", "ALL"), Handler: handle(s.removeDeviceGroupMembers)},

		// Administrator settings (spec 2.12, 4.3).
		{Method: "GET", Path: adminSettingsPath, Scopes: Scopes("conditional_access_policy", "READ", "ALL"), Handler: handle(s.getAdminSettings)},
		{Method: "PATCH", Path: adminSettingsPath, Scopes: Scopes("conditional_access_policy", "CREATE", "WRITE", "ALL"), Handler: handle(s.patchAdminSettings)},

		// Certificate authorities of the smart card factor config (spec 2.10, 4.3).
		{Method: "GET", Path: caConfigsPath, Scopes: Scopes("auth", "READ", "ALL"), Handler: handle(s.listCAConfigs)},
		{Method: "POST", Path: caConfigsPath, Scopes: Scopes("auth", "CREATE", "WRITE", "ALL"), Handler: handle(s.createCAConfig), MaxBody: caMaxBody},
		{Method: "GET", Path: caConfigsPath + "/:ca_config_id", Scopes: Scopes("auth", "READ", "ALL"), Handler: handle(s.getCAConfig)},
		{Method: "PATCH", Path: caConfigsPath + "/:ca_config_id", Scopes: Scopes("auth", "UPDATE", "WRITE", "ALL"), Handler: handle(s.updateCAConfig), MaxBody: caMaxBody},
		{Method: "DELETE", Path: caConfigsPath + "/:ca_config_id", Scopes: Scopes("auth", "DELETE", "WRITE", "ALL"), Handler: handle(s.deleteCAConfig)},

		// Conditional access decisions: "what if" for admins (docs/protection.md).
		{Method: "POST", Path: policiesPath + "/evaluate", Scopes: Scopes("conditional_access_policy", "READ", "ALL"), Handler: handle(s.evaluatePolicies)},

		// Management actions (spec 4.5): scopes as the spec's table
		// (operations compare ignoring case).
		{Method: "GET", Path: mgmtPath + "/data", Scopes: Scopes("management", "READ", "ALL"), Handler: handle(s.mgmtData)},
		{Method: "GET", Path: mgmtPath + "/view-columns", Scopes: Scopes("management", "READ", "ALL"), Handler: handle(s.getViewColumns)},
		{Method: "PUT", Path: mgmtPath + "/view-columns", Scopes: Scopes("management", "WRITE", "UPDATE", "ALL"), Handler: handle(s.putViewColumns)},
		{Method: "POST", Path: mgmtPath + "/execute", Scopes: Scopes("management", "WRITE", "ALL"), Handler: handle(s.mgmtExecute), MaxBody: mgmtExecuteMaxBody, Idempotent: true},
		{Method: "POST", Path: mgmtPath + "/uploads", Scopes: Scopes("management", "WRITE", "CREATE", "ALL"), Handler: handle(s.mgmtUpload), MaxBody: mgmtUploadMaxBytes + 64<<10, Idempotent: true},
		{Method: "GET", Path: mgmtPath + "/uploads/:upload_id", Scopes: Scopes("management", "READ", "ALL"), Handler: handle(s.mgmtGetUpload)},
		{Method: "GET", Path: mgmtPath + "/uploads/:upload_id/data", Scopes: Scopes("management", "READ", "ALL"), Handler: handle(s.mgmtUploadData)},
		{Method: "DELETE", Path: mgmtPath + "/uploads/:upload_id/data", Scopes: Scopes("management", "WRITE", "DELETE", "ALL"), Handler: handle(s.mgmtDeleteUploadData)},
		{Method: "GET", Path: mgmtPath + "/executions/:execution_id/status", Scopes: Scopes("management", "READ", "ALL"), Handler: handle(s.mgmtExecutionStatus)},
		{Method: "GET", Path: mgmtPath + "/executions/:execution_id", Scopes: Scopes("management", "READ", "ALL"), Handler: handle(s.mgmtGetExecution)},
		{Method: "GET", Path: mgmtPath + "/executions/:execution_id/data", Scopes: Scopes("management", "READ", "ALL"), Handler: handle(s.mgmtExecutionData)},
		{Method: "POST", Path: mgmtPath + "/executions/:execution_id/retry", Scopes: Scopes("management", "WRITE", "ALL"), Handler: handle(s.mgmtRetry), Idempotent: true},

		// Notification templates and their metadata (spec 4.7).
		{Method: "GET", Path: "/templates/notification", Scopes: Scopes("notification_template", "READ", "ALL"), Handler: handle(s.listTemplates)},
		{Method: "POST", Path: "/templates/notification", Scopes: Scopes("notification_template", "CREATE", "WRITE", "ALL"), Handler: handle(s.createTemplate), MaxBody: templateMaxBody},
		{Method: "GET", Path: "/templates/notification/:template_id", Scopes: Scopes("notification_template", "READ", "ALL"), Handler: handle(s.getTemplate)},
		{Method: "PATCH", Path: "/templates/notification/:template_id", Scopes: Scopes("notification_template", "UPDATE", "WRITE", "ALL"), Handler: handle(s.updateTemplate), MaxBody: templateMaxBody},
		{Method: "DELETE", Path: "/templates/notification/:template_id", Scopes: Scopes("notification_template", "DELETE", "WRITE", "ALL"), Handler: handle(s.deleteTemplate)},
		{Method: "GET", Path: "/meta/templates/notification/default_configs", Scopes: Scopes("meta", "READ"), Handler: handle(s.templateDefaultConfigs)},
		{Method: "GET", Path: "/meta/templates/notification/module_configs", Scopes: Scopes("meta", "READ"), Handler: handle(s.templateModuleConfigs)},

		// Notification auto-schedules (spec 4.4, 2.15), with update, delete,
		// pause, resume and run-now, and their runs and deliveries.
		{Method: "GET", Path: schedulesPath, Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: handle(s.listSchedules)},
		{Method: "POST", Path: schedulesPath, Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "CREATE"), Handler: handle(s.createSchedule)},
		{Method: "GET", Path: schedulesPath + "/:schedule_id", Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: handle(s.getSchedule)},
		{Method: "PATCH", Path: schedulesPath + "/:schedule_id", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "UPDATE"), Handler: handle(s.updateSchedule)},
		{Method: "DELETE", Path: schedulesPath + "/:schedule_id", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "DELETE"), Handler: handle(s.deleteSchedule)},
		{Method: "POST", Path: schedulesPath + "/:schedule_id/pause", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "UPDATE"), Handler: handle(s.pauseSchedule)},
		{Method: "POST", Path: schedulesPath + "/:schedule_id/resume", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "UPDATE"), Handler: handle(s.resumeSchedule)},
		{Method: "POST", Path: schedulesPath + "/:schedule_id/run-now", Scopes: Scopes("quick_enrollment", "ALL", "WRITE"), Handler: handle(s.runSchedule), Idempotent: true},
		{Method: "GET", Path: schedulesPath + "/:schedule_id/runs", Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: handle(s.listScheduleRuns)},
		{Method: "GET", Path: schedulesPath + "/:schedule_id/runs/:run_id/deliveries", Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: handle(s.listRunDeliveries)},
	}
}

// SCIMRoutes lists the /scim/v2 surface (RFC 7644; docs/scim.md), served by
// package api/scim behind its own bearer-token check: a provisioning token
// of the organization, or an OAuth access token holding svc.scim.READ
// (reads) or svc.scim.WRITE (writes Write marks), or svc.scim.ALL.
func (s *Server) SCIMRoutes() []scim.Route {
	h := s.scim
	return []scim.Route{
		// Discovery (RFC 7644 §4).
		{Method: "GET", Path: "/ServiceProviderConfig", Handler: h.Handle(h.ServiceProviderConfig)},
		{Method: "GET", Path: "/ResourceTypes", Handler: h.Handle(h.ResourceTypes)},
		{Method: "GET", Path: "/ResourceTypes/:id", Handler: h.Handle(h.ResourceType)},
		{Method: "GET", Path: "/Schemas", Handler: h.Handle(h.Schemas)},
		{Method: "GET", Path: "/Schemas/:id", Handler: h.Handle(h.Schema)},

		// Users: the identity area's users with the enterprise extension.
		{Method: "GET", Path: "/Users", Handler: h.Handle(h.ListUsers)},
		{Method: "POST", Path: "/Users/.search", Handler: h.Handle(h.SearchUsers)},
		{Method: "POST", Path: "/Users", Handler: h.Handle(h.CreateUser), Write: true},
		{Method: "GET", Path: "/Users/:id", Handler: h.Handle(h.GetUser)},
		{Method: "PUT", Path: "/Users/:id", Handler: h.Handle(h.ReplaceUser), Write: true},
		{Method: "PATCH", Path: "/Users/:id", Handler: h.Handle(h.PatchUser), Write: true},
		{Method: "DELETE", Path: "/Users/:id", Handler: h.Handle(h.DeleteUser), Write: true},

		// Groups: static groups are written; dynamic ones are read-only
		// as to their members.
		{Method: "GET", Path: "/Groups", Handler: h.Handle(h.ListGroups)},
		{Method: "POST", Path: "/Groups/.search", Handler: h.Handle(h.SearchGroups)},
		{Method: "POST", Path: "/Groups", Handler: h.Handle(h.CreateGroup), Write: true},
		{Method: "GET", Path: "/Groups/:id", Handler: h.Handle(h.GetGroup)},
		{Method: "PUT", Path: "/Groups/:id", Handler: h.Handle(h.ReplaceGroup), Write: true},
		{Method: "PATCH", Path: "/Groups/:id", Handler: h.Handle(h.PatchGroup), Write: true},
		{Method: "DELETE", Path: "/Groups/:id", Handler: h.Handle(h.DeleteGroup), Write: true},
	}
}
