package api

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"iam/models/audit"
	"iam/models/devices"
	"iam/models/hooks"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/listing"
	"iam/models/management"
	"iam/models/notification"
	"iam/models/protection"
)

// listSchemas maps each operation that takes filter, sort or fields to the
// allow-list its handler parses them with.
func listSchemas() map[string]*listing.Schema {
	configs := make([]*listing.Schema, len(protection.ConfigFamilies))
	for i, f := range protection.ConfigFamilies {
		configs[i] = protection.ConditionConfigListing(f)
	}
	return map[string]*listing.Schema{
		"GET /api/v1/users":             identity.UserListing,
		"GET /api/v1/groups":            identity.GroupListing,
		"GET /api/v1/groups/{group_id}": groupDetail,
		// Without a user read scope the members are summaries
		// (models.MemberListing): the document says what both accept.
		"GET /api/v1/groups/{group_id}/members":                                                                     commonListing(identity.UserListing, identity.MemberListing),
		"GET /api/v1/jobs":                                                                                          jobs.JobListing,
		"GET /api/v1/audit-events":                                                                                  audit.EventListing,
		"GET /api/v1/event-hooks":                                                                                   hooks.HookListing,
		"GET /api/v1/event-hooks/{hook_id}/deliveries":                                                              hooks.DeliveryListing,
		"GET /api/v1/jobs/{job_id}/results":                                                                         jobs.JobResultListing,
		"GET /api/v1/management/actions/{action_id}/data":                                                           management.MgmtDataListing,
		"POST /api/v1/management/actions/{action_id}/execute":                                                       management.MgmtDataListing,
		"GET /api/v1/management/actions/{action_id}/uploads/{upload_id}/data":                                       management.UploadRowListing,
		"DELETE /api/v1/management/actions/{action_id}/uploads/{upload_id}/data":                                    management.UploadRowListing,
		"GET /api/v1/management/actions/{action_id}/executions/{execution_id}/data":                                 management.ExecutionResultListing,
		"GET /api/v1/protection/device-groups":                                                                      protection.DeviceGroupListing,
		"GET /api/v1/protection/device-groups/{device_group_id}/members":                                            protection.DeviceGroupMemberListing,
		"GET /api/v1/templates/notification":                                                                        notification.TemplateListing,
		"GET /api/v1/protection/quick-enrollment/notification-auto-schedule":                                        notification.NotificationScheduleListing,
		"GET /api/v1/protection/quick-enrollment/notification-auto-schedule/{schedule_id}/runs":                     notification.NotificationRunListing,
		"GET /api/v1/protection/quick-enrollment/notification-auto-schedule/{schedule_id}/runs/{run_id}/deliveries": notification.NotificationDeliveryListing,
		"GET /api/v1/devices":                                                                                       devices.DeviceListing,
		"GET /api/v1/devices/{device_id}/accounts":                                                                  devices.LocalAccountListing,
		"GET /api/v1/device-account-linking/history":                                                                devices.LinkHistoryListing,
		"GET /api/v1/devices/{device_id}/offline-enrolled-users":                                                    devices.OfflineUserListing,
		// One operation for every family: what all of them accept.
		"GET /api/v1/protection/conditionalfactor-configs/{family}":                             commonListing(configs...),
		"GET /api/v1/protection/conditional-access-policies":                                    protection.PolicyListing,
		"GET /api/v1/protection/conditional-access-policies/{policy_id}/user-assignment-users":  protection.PolicyUserListing,
		"GET /api/v1/protection/conditional-access-policies/{policy_id}/user-assignment-groups": protection.PolicyGroupListing,
		"GET /api/v1/protection/conditional-access-policies/{policy_id}/protected-devices":      protection.PolicyDeviceListing,
	}
}

// commonListing is a schema of what every one of lists accepts: the
// attributes they all have, filterable or sortable where all of them are.
func commonListing(lists ...*listing.Schema) *listing.Schema {
	var attrs []listing.Attribute
	for _, a := range lists[0].Attributes {
		common := a
		for _, l := range lists[1:] {
			i := slices.IndexFunc(l.Attributes, func(b listing.Attribute) bool { return b.Name == a.Name && b.Type == a.Type })
			if i < 0 {
				common.Name = ""
				break
			}
			common.Filter = common.Filter && l.Attributes[i].Filter
			common.Sort = common.Sort && l.Attributes[i].Sort
		}
		if common.Name != "" {
			attrs = append(attrs, common)
		}
	}
	return &listing.Schema{Name: "common", Attributes: attrs}
}

// Every list's filter, sort and fields parameters have the patterns of
// the allow-list its handler checks them with, so that a request the
// document calls valid is not refused, and a list whose attributes change
// is caught until the document follows.
func TestOpenAPI_ListPatterns(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	lists := listSchemas()
	for _, path := range doc.Paths.InMatchingOrder() {
		if strings.HasPrefix(path, "/scim/v2/") {
			continue // SCIM's own filter language (models/scim), tested there
		}
		item := doc.Paths.Value(path)
		for method, op := range item.Operations() {
			where := method + " " + path
			s := lists[where]
			params := append(slices.Clone(op.Parameters), item.Parameters...)
			for _, name := range []string{"filter", "sort", "fields"} {
				p := params.GetByInAndName("query", name)
				if p == nil {
					continue
				}
				if s == nil {
					t.Errorf("%s takes %s: add its allow-list to listSchemas", where, name)
					continue
				}
				want := map[string]string{"filter": s.FilterPattern(), "sort": s.SortPattern(), "fields": s.FieldsPattern()}[name]
				if got := patternOf(p.Schema); got != want {
					t.Errorf("%s: %s pattern\n got: %s\nwant: '%s'", where, name, got, want)
				}
				if name == "filter" && (p.Schema.Value.MaxLength == nil || *p.Schema.Value.MaxLength != listing.MaxFilterLength) {
					t.Errorf("%s: filter maxLength %v, want %d", where, p.Schema.Value.MaxLength, listing.MaxFilterLength)
				}
			}
		}
	}
}

func patternOf(s *openapi3.SchemaRef) string {
	if s == nil || s.Value == nil {
		return fmt.Sprint(nil)
	}
	return s.Value.Pattern
}
