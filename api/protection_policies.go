package api

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/devices"
	"iam/models/identity"
	"iam/models/listing"
	"iam/models/protection"
)

// policiesPath is where the conditional access policies live (spec 4.3).
const policiesPath = "/protection/conditional-access-policies"

// policyView is a conditional access policy as the API shows it (spec
// 2.11), with the list item's fields too.
type policyView struct {
	ID                string                            `json:"id"`
	Name              string                            `json:"name"`
	Description       string                            `json:"description"`
	IsEnabled         bool                              `json:"is_enabled"`
	IsDefaultPolicy   bool                              `json:"is_default_policy"`
	Priority          int64                             `json:"priority"`
	IsAgentRequired   bool                              `json:"is_agent_required"`
	UserAssignments   protection.UserAssignments        `json:"user_assignments"`
	AccessConditions  protection.AccessConditions       `json:"access_conditions"`
	AccessType        string                            `json:"access_type"`
	Endpoints         []string                          `json:"endpoints"`
	EndpointsSettings []protection.EndpointSetting      `json:"endpoints_settings"`
	AdvancedSettings  protection.PolicyAdvancedSettings `json:"advanced_settings"`
	LastModifiedTime  time.Time                         `json:"last_modified_time"`
	LastModifiedUser  string                            `json:"last_modified_user"`
}

// policyItem is a policy as the list shows it: display_name instead of
// name, and "All Endpoints" for a policy covering every endpoint.
type policyItem struct {
	ID               string    `json:"id"`
	DisplayName      string    `json:"display_name"`
	Description      string    `json:"description"`
	IsEnabled        bool      `json:"is_enabled"`
	IsDefaultPolicy  bool      `json:"is_default_policy"`
	Priority         int64     `json:"priority"`
	IsAgentRequired  bool      `json:"is_agent_required"`
	AccessType       string    `json:"access_type"`
	Endpoints        []string  `json:"endpoints"`
	LastModifiedTime time.Time `json:"last_modified_time"`
	LastModifiedUser string    `json:"last_modified_user"`
}

func toRefIDs(ids []int64) []protection.RefID {
	out := make([]protection.RefID, len(ids))
	for i, id := range ids {
		out[i] = protection.RefID(id)
	}
	return out
}

func newPolicyView(p *protection.Policy) policyView {
	conds := p.Conditions
	if conds == nil {
		conds = []protection.PolicyCondition{}
	}
	return policyView{
		ID: models.FormatID(p.ID), Name: p.Name, Description: p.Description, IsEnabled: p.IsEnabled, IsDefaultPolicy: p.IsDefault,
		Priority: p.Priority, IsAgentRequired: p.IsAgentRequired(),
		UserAssignments:  protection.UserAssignments{UserIDs: toRefIDs(p.UserIDs), GroupIDs: toRefIDs(p.GroupIDs), UsersCount: len(p.UserIDs), GroupsCount: len(p.GroupIDs)},
		AccessConditions: protection.AccessConditions{CriteriaExpression: p.CriteriaExpression, Conditions: conds},
		AccessType:       p.AccessType, Endpoints: p.Endpoints(), EndpointsSettings: p.EndpointsSettings, AdvancedSettings: p.AdvancedSettings,
		LastModifiedTime: p.UpdatedAt, LastModifiedUser: p.UpdatedByName,
	}
}

func newPolicyItem(p *protection.Policy) policyItem {
	endpoints := p.Endpoints()
	if len(endpoints) == len(protection.Endpoints) {
		endpoints = []string{protection.AllEndpoints}
	}
	return policyItem{ID: models.FormatID(p.ID), DisplayName: p.Name, Description: p.Description, IsEnabled: p.IsEnabled,
		IsDefaultPolicy: p.IsDefault, Priority: p.Priority, IsAgentRequired: p.IsAgentRequired(), AccessType: p.AccessType,
		Endpoints: endpoints, LastModifiedTime: p.UpdatedAt, LastModifiedUser: p.UpdatedByName}
}

// policyRequest is the body of POST, and of PATCH once merged over the
// policy as GET shows it. endpoints, when given, must be the endpoints of
// endpoints_settings (it is derived from them).
type policyRequest struct {
	Name              string                            `json:"name"`
	Description       string                            `json:"description"`
	IsEnabled         *bool                             `json:"is_enabled"`
	UserAssignments   protection.UserAssignments        `json:"user_assignments"`
	AccessConditions  protection.AccessConditions       `json:"access_conditions"`
	AccessType        string                            `json:"access_type"`
	Endpoints         []string                          `json:"endpoints"`
	EndpointsSettings []protection.EndpointSetting      `json:"endpoints_settings"`
	AdvancedSettings  protection.PolicyAdvancedSettings `json:"advanced_settings"`
}

// toModel turns the request into a policy of orgID; is_enabled defaults to
// true.
func (r *policyRequest) toModel(orgID int64) (*protection.Policy, error) {
	p := &protection.Policy{OrgID: orgID, Name: r.Name, Description: r.Description, IsEnabled: r.IsEnabled == nil || *r.IsEnabled,
		AccessType: r.AccessType, CriteriaExpression: r.AccessConditions.CriteriaExpression, Conditions: r.AccessConditions.Conditions,
		EndpointsSettings: r.EndpointsSettings, AdvancedSettings: r.AdvancedSettings}
	for _, id := range r.UserAssignments.UserIDs {
		p.UserIDs = append(p.UserIDs, int64(id))
	}
	for _, id := range r.UserAssignments.GroupIDs {
		p.GroupIDs = append(p.GroupIDs, int64(id))
	}
	if r.Endpoints != nil {
		want := slices.Clone(r.Endpoints)
		if slices.Equal(want, []string{protection.AllEndpoints}) {
			want = slices.Clone(protection.Endpoints)
		}
		slices.Sort(want)
		var have []string
		for _, s := range r.EndpointsSettings {
			have = append(have, s.Endpoint)
		}
		slices.Sort(have)
		if !slices.Equal(slices.Compact(want), have) {
			return nil, models.Invalid("endpoints", "must list the endpoints of endpoints_settings (or leave endpoints out: it follows them)")
		}
	}
	return p, nil
}

func actorOf(c *gin.Context) protection.PolicyActor {
	p := principal(c)
	return protection.PolicyActor{UserID: p.UserID, ClientID: p.ClientID}
}

// listPolicies: GET /protection/conditional-access-policies (offset
// paging, priority order).
func (s *Server) listPolicies(c *gin.Context) error {
	params, err := listing.Parse(c.Request.URL.Query(), protection.PolicyListing)
	if err != nil {
		return err
	}
	list, meta, err := s.store.Policies.List(c.Request.Context(), principal(c).OrgID, params)
	if err != nil {
		return err
	}
	items := make([]policyItem, len(list))
	for i := range list {
		items[i] = newPolicyItem(&list[i])
	}
	writeList(c, items, params.Fields, meta)
	return nil
}

// createPolicy: POST /protection/conditional-access-policies, 201 {data:
// policy}; the new policy comes just before the default one.
func (s *Server) createPolicy(c *gin.Context) error {
	var req policyRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	p, err := req.toModel(principal(c).OrgID)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	if err = s.store.Policies.Create(ctx, p, actorOf(c)); err != nil {
		return err
	}
	got, err := s.store.Policies.Get(ctx, p.OrgID, p.ID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, gin.H{"data": newPolicyView(got)})
	return nil
}

// getPolicy: GET .../{policy_id}, {data: policy}.
func (s *Server) getPolicy(c *gin.Context) error {
	id, err := pathID(c, "policy_id", protection.ErrPolicyNotFound)
	if err != nil {
		return err
	}
	p, err := s.store.Policies.Get(c.Request.Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newPolicyView(p)})
	return nil
}

// readOnlyPolicyFields are the members of a policy's view a PATCH cannot
// set; they are dropped from the document the patch applies to.
var readOnlyPolicyFields = []string{"id", "is_default_policy", "priority", "is_agent_required", "endpoints", "last_modified_time", "last_modified_user"}

// updatePolicy: PATCH .../{policy_id}, a JSON merge patch over the policy
// as GET shows it (arrays replace); the result is checked whole.
func (s *Server) updatePolicy(c *gin.Context) error {
	id, err := pathID(c, "policy_id", protection.ErrPolicyNotFound)
	if err != nil {
		return err
	}
	patch, err := decodePatch(c)
	if err != nil {
		return err
	}
	orgID := principal(c).OrgID
	p, err := s.store.Policies.Update(c.Request.Context(), orgID, id, actorOf(c), func(cur *protection.Policy) (*protection.Policy, error) {
		var req policyRequest
		mergeErr := mergeRequest(newPolicyView(cur), patch, func(doc, patch map[string]any) {
			for _, k := range readOnlyPolicyFields {
				if _, given := patch[k]; !given || k != "endpoints" {
					delete(doc, k)
				}
			}
		}, &req)
		if mergeErr != nil {
			return nil, mergeErr
		}
		return req.toModel(orgID)
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newPolicyView(p)})
	return nil
}

// deletePolicy: DELETE .../{policy_id}, 204; 409 for the default policy.
func (s *Server) deletePolicy(c *gin.Context) error {
	id, err := pathID(c, "policy_id", protection.ErrPolicyNotFound)
	if err != nil {
		return err
	}
	if err := s.store.Policies.Delete(c.Request.Context(), principal(c).OrgID, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// priorityRequest is the body of PUT .../priority.
type priorityRequest struct {
	IDs []string `json:"ids"`
}

// reorderPolicies: PUT .../priority {ids: [every non-default policy id, in
// the new order]}; 200 with the policies as the list shows them, in their
// new order.
func (s *Server) reorderPolicies(c *gin.Context) error {
	var req priorityRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.IDs == nil {
		return models.Invalid("ids", "is required: every policy id but the default's, in the new order")
	}
	if len(req.IDs) > protection.PolicyLimits.MaxPolicies {
		return models.Invalid("ids", "holds more than %d ids", protection.PolicyLimits.MaxPolicies)
	}
	ids := make([]int64, len(req.IDs))
	for i, raw := range req.IDs {
		id, err := models.ParseID("ids", raw)
		if err != nil {
			return models.Invalid("ids", "%q is not a policy id", raw)
		}
		ids[i] = id
	}
	ctx := c.Request.Context()
	orgID := principal(c).OrgID
	if err := s.store.Policies.Reorder(ctx, orgID, ids); err != nil {
		return err
	}
	params, err := listing.Parse(map[string][]string{"limit": {"1000"}}, protection.PolicyListing)
	if err != nil {
		return err
	}
	list, _, err := s.store.Policies.List(ctx, orgID, params)
	if err != nil {
		return err
	}
	items := make([]policyItem, len(list))
	for i := range list {
		items[i] = newPolicyItem(&list[i])
	}
	c.JSON(http.StatusOK, gin.H{"data": items})
	return nil
}

// Sub-list items (spec 4.3).
type policyUserItem struct {
	ID            string                  `json:"id"`
	Name          string                  `json:"name"`
	Email         string                  `json:"email"`
	PrimarySource *identity.PrimarySource `json:"primary_source"`
}

type policyGroupItem struct {
	ID            string                  `json:"id"`
	Name          string                  `json:"name"`
	Type          string                  `json:"type"`
	PrimarySource *identity.PrimarySource `json:"primary_source"`
}

type policyDeviceItem struct {
	ID            string                  `json:"id"`
	Name          string                  `json:"name"`
	JoinType      string                  `json:"join_type"`
	PrimarySource *identity.PrimarySource `json:"primary_source"`
	AgentStatus   string                  `json:"agent_status"`
}

// policySubList answers one of a policy's sub-lists: the policy from the
// path (404 Policy Not Found), the list's parameters by schema, the page
// load reads, each item shown by view.
func policySubList[T, V any](c *gin.Context, schema *listing.Schema,
	load func(ctx context.Context, orgID, policyID int64, p listing.Params) ([]T, listing.Meta, error), view func(T) V) error {
	id, err := pathID(c, "policy_id", protection.ErrPolicyNotFound)
	if err != nil {
		return err
	}
	params, err := listing.Parse(c.Request.URL.Query(), schema)
	if err != nil {
		return err
	}
	list, meta, err := load(c.Request.Context(), principal(c).OrgID, id, params)
	if err != nil {
		return err
	}
	items := make([]V, len(list))
	for i, x := range list {
		items[i] = view(x)
	}
	writeList(c, items, params.Fields, meta)
	return nil
}

// policyUsers: GET .../{policy_id}/user-assignment-users.
func (s *Server) policyUsers(c *gin.Context) error {
	return policySubList(c, protection.PolicyUserListing, s.store.Policies.AssignedUsers, func(u protection.PolicyUser) policyUserItem {
		return policyUserItem{ID: models.FormatID(u.ID), Name: u.Name, Email: u.Email, PrimarySource: u.PrimarySource}
	})
}

// policyGroups: GET .../{policy_id}/user-assignment-groups.
func (s *Server) policyGroups(c *gin.Context) error {
	return policySubList(c, protection.PolicyGroupListing, s.store.Policies.AssignedGroups, func(g protection.PolicyGroup) policyGroupItem {
		typ := "static"
		if g.IsDynamic {
			typ = "dynamic"
		}
		return policyGroupItem{ID: models.FormatID(g.ID), Name: g.Name, Type: typ, PrimarySource: g.PrimarySource}
	})
}

// policyDevices: GET .../{policy_id}/protected-devices. Devices have no
// directory source: primary_source is null.
func (s *Server) policyDevices(c *gin.Context) error {
	versions := s.packages.versions()
	load := func(ctx context.Context, orgID, policyID int64, p listing.Params) ([]devices.Device, listing.Meta, error) {
		return s.store.Policies.ProtectedDevices(ctx, orgID, policyID, p, versions)
	}
	return policySubList(c, protection.PolicyDeviceListing, load, func(d devices.Device) policyDeviceItem {
		return policyDeviceItem{ID: models.FormatID(d.ID), Name: d.Name, JoinType: d.JoinType, AgentStatus: d.ListedAgentStatus}
	})
}
