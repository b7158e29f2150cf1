package api

import (
	"github.com/gin-gonic/gin"
)

// Route is one /api/v1 route: its method and path (relative to /api/v1), the
// scopes of which the token must hold any one, and its handler. MaxBody
// overrides the default body limit (uploads).
type Route struct {
	Method  string
	Path    string
	Scopes  []string
	Handler gin.HandlerFunc
	MaxBody int64
}

// Routes lists the whole /api/v1 surface. Every route sits behind one
// authentication middleware and its own scope check (server.go).
func (s *Server) Routes() []Route {
	return []Route{
		// Jobs (spec 4.6).
		{Method: "GET", Path: "/jobs", Scopes: Scopes("job", "READ", "ALL"), Handler: s.listJobs},
		{Method: "GET", Path: "/jobs/:job_id", Scopes: Scopes("job", "READ", "ALL"), Handler: s.getJob},
		{Method: "GET", Path: "/jobs/:job_id/results", Scopes: Scopes("job", "READ", "ALL"), Handler: s.listJobResults},
		{Method: "DELETE", Path: "/jobs/:job_id", Scopes: Scopes("job", "DELETE", "ALL"), Handler: s.deleteJob},

		// Users and groups (spec 4.1). WRITE covers creating, updating and
		// deleting; group members change under UPDATE.
		{Method: "GET", Path: "/users", Scopes: Scopes("user", "READ", "ALL"), Handler: s.listUsers},
		{Method: "POST", Path: "/users", Scopes: Scopes("user", "CREATE", "WRITE", "ALL"), Handler: s.createUser},
		{Method: "DELETE", Path: "/users", Scopes: Scopes("user", "DELETE", "WRITE", "ALL"), Handler: s.deleteUsers},
		{Method: "GET", Path: "/users/:user_id", Scopes: Scopes("user", "READ", "ALL"), Handler: s.getUser},
		{Method: "PATCH", Path: "/users/:user_id", Scopes: Scopes("user", "UPDATE", "WRITE", "ALL"), Handler: s.updateUser},
		{Method: "DELETE", Path: "/users/:user_id", Scopes: Scopes("user", "DELETE", "WRITE", "ALL"), Handler: s.deleteUser},
		{Method: "GET", Path: "/groups", Scopes: Scopes("group", "READ", "ALL"), Handler: s.listGroups},
		{Method: "POST", Path: "/groups", Scopes: Scopes("group", "CREATE", "WRITE", "ALL"), Handler: s.createGroup},
		{Method: "DELETE", Path: "/groups", Scopes: Scopes("group", "DELETE", "WRITE", "ALL"), Handler: s.deleteGroups},
		{Method: "GET", Path: "/groups/:group_id", Scopes: Scopes("group", "READ", "ALL"), Handler: s.getGroup},
		{Method: "PATCH", Path: "/groups/:group_id", Scopes: Scopes("group", "UPDATE", "WRITE", "ALL"), Handler: s.updateGroup},
		{Method: "DELETE", Path: "/groups/:group_id", Scopes: Scopes("group", "DELETE", "WRITE", "ALL"), Handler: s.deleteGroup},
		{Method: "GET", Path: "/groups/:group_id/members", Scopes: Scopes("group", "READ", "ALL"), Handler: s.groupMembers},
		{Method: "POST", Path: "/groups/:group_id/members", Scopes: Scopes("group", "UPDATE", "WRITE", "ALL"), Handler: s.addGroupMembers},
		{Method: "DELETE", Path: "/groups/:group_id/members", Scopes: Scopes("group", "UPDATE", "WRITE", "ALL"), Handler: s.removeGroupMembers},

		// Authentication factor configs and quick enrollment (spec 4.3, 4.4).
		{Method: "GET", Path: "/protection/authnfactor-configs", Scopes: append(Scopes("auth", "READ", "ALL"), Scopes("quick_enrollment", "READ", "ALL")...), Handler: s.listFactorConfigs},
		{Method: "GET", Path: "/protection/quick-enrollment/sample-csv", Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: s.sampleCSV},
		{Method: "POST", Path: "/protection/quick-enrollment/upload-csv", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "CREATE"), Handler: s.uploadCSV, MaxBody: s.cfg.UploadMaxBytes},
		{Method: "POST", Path: "/protection/quick-enrollment/upload-smartcards", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "CREATE"), Handler: s.uploadSmartCards, MaxBody: s.cfg.UploadMaxBytes},
		{Method: "GET", Path: "/protection/quick-enrollment/logon-script-config", Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: s.getLogonScript},
		{Method: "PUT", Path: "/protection/quick-enrollment/logon-script-config", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "UPDATE"), Handler: s.putLogonScript},
		{Method: "PATCH", Path: "/protection/quick-enrollment/logon-script-config", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "UPDATE"), Handler: s.patchLogonScript},

		// Notification templates and their metadata (spec 4.7).
		{Method: "GET", Path: "/templates/notification", Scopes: Scopes("notification_template", "read", "all"), Handler: s.listTemplates},
		{Method: "POST", Path: "/templates/notification", Scopes: Scopes("notification_template", "create", "write", "all"), Handler: s.createTemplate, MaxBody: templateMaxBody},
		{Method: "GET", Path: "/templates/notification/:template_id", Scopes: Scopes("notification_template", "read", "all"), Handler: s.getTemplate},
		{Method: "PATCH", Path: "/templates/notification/:template_id", Scopes: Scopes("notification_template", "update", "write", "all"), Handler: s.updateTemplate, MaxBody: templateMaxBody},
		{Method: "DELETE", Path: "/templates/notification/:template_id", Scopes: Scopes("notification_template", "delete", "write", "all"), Handler: s.deleteTemplate},
		{Method: "GET", Path: "/meta/templates/notification/default_configs", Scopes: Scopes("meta", "READ"), Handler: s.templateDefaultConfigs},
		{Method: "GET", Path: "/meta/templates/notification/module_configs", Scopes: Scopes("meta", "READ"), Handler: s.templateModuleConfigs},

		// Notification auto-schedules (spec 4.4, 2.15), with update, delete,
		// pause, resume and run-now, and their runs and deliveries.
		{Method: "GET", Path: schedulesPath, Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: s.listSchedules},
		{Method: "POST", Path: schedulesPath, Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "CREATE"), Handler: s.createSchedule},
		{Method: "GET", Path: schedulesPath + "/:schedule_id", Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: s.getSchedule},
		{Method: "PATCH", Path: schedulesPath + "/:schedule_id", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "UPDATE"), Handler: s.updateSchedule},
		{Method: "DELETE", Path: schedulesPath + "/:schedule_id", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "DELETE"), Handler: s.deleteSchedule},
		{Method: "POST", Path: schedulesPath + "/:schedule_id/pause", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "UPDATE"), Handler: s.pauseSchedule},
		{Method: "POST", Path: schedulesPath + "/:schedule_id/resume", Scopes: Scopes("quick_enrollment", "ALL", "WRITE", "UPDATE"), Handler: s.resumeSchedule},
		{Method: "POST", Path: schedulesPath + "/:schedule_id/run-now", Scopes: Scopes("quick_enrollment", "ALL", "WRITE"), Handler: s.runSchedule},
		{Method: "GET", Path: schedulesPath + "/:schedule_id/runs", Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: handle(s.listScheduleRuns)},
		{Method: "GET", Path: schedulesPath + "/:schedule_id/runs/:run_id/deliveries", Scopes: Scopes("quick_enrollment", "ALL", "READ"), Handler: handle(s.listRunDeliveries)},
	}
}
