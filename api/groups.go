package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"

	"iam/api/auth"
	"iam/models"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/listing"
	"iam/workflows"
)

// membersInGroup is how many member ids GET /groups/{id} carries; the
// members themselves page through GET /groups/{id}/members.
const membersInGroup = 1000

// groupView is a group as the API shows it (spec 2.2, snake_case).
// membership_rule and membership_job_id are the service's additions for
// dynamic groups. Members appear only in GET /groups/{id}.
type groupView struct {
	ID              string          `json:"id"`
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	MembersCount    int64           `json:"members_count"`
	WhenCreated     time.Time       `json:"when_created"`
	IsDynamic       bool            `json:"is_dynamic"`
	MembershipRule  string          `json:"membership_rule"`
	MembershipJobID *string         `json:"membership_job_id"`
	PrimarySource   groupSourceView `json:"primary_source"`
	Members         *[]string       `json:"members,omitempty"`
}

// groupSourceView is spec 2.2's primary_source.
type groupSourceView struct {
	ID                 string          `json:"id"`
	Name               string          `json:"name"`
	ApplicationService groupAppService `json:"application_service"`
}

type groupAppService struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	Name        string `json:"name"`
	Logo        string `json:"logo"`
}

func newGroupView(g *identity.Group) groupView {
	v := groupView{
		ID: models.FormatID(g.ID), Name: g.Name, Description: g.Description, MembersCount: g.MembersCount,
		WhenCreated: g.WhenCreated.UTC(), IsDynamic: g.IsDynamic, MembershipRule: g.MembershipRule,
		PrimarySource: groupSourceView{ID: localSource.ID, Name: "IAM", ApplicationService: groupAppService{
			ID: localSource.ID, DisplayName: localSource.ServiceName, Name: localSource.Name, Logo: localSource.Logo}},
	}
	if g.MembershipJobID != nil {
		id := models.FormatID(*g.MembershipJobID)
		v.MembershipJobID = &id
	}
	return v
}

// groupDetail allows fields on GET /groups/{id}: the list's attributes and
// members.
var groupDetail = listing.MustSchema(listing.Schema{
	Name:       "group",
	Paging:     listing.CursorPaging,
	Attributes: append(append([]listing.Attribute{}, identity.GroupListing.Attributes...), listing.Attribute{Name: "members"}),
})

// recomputeJob is the job row a membership recompute starts from.
func recomputeJob(c *gin.Context) *jobs.Job {
	return &jobs.Job{
		Kind:       jobs.GroupRecomputeJobKind,
		Module:     workflows.IdentityModule,
		ActionName: workflows.GroupRecomputeAction,
		CreatedBy:  principal(c).UserID,
	}
}

// startRecompute starts a recompute job the write committed (startJob);
// job is nil, or was not written (ID 0), when nothing needs recomputing.
func (s *Server) startRecompute(c *gin.Context, job *jobs.Job) {
	if job != nil && job.ID != 0 {
		s.startJob(c, job)
	}
}

// listGroups: GET /groups (cursor paging).
func (s *Server) listGroups(c *gin.Context) error {
	ctx := c.Request.Context()
	params, err := listing.Parse(c.Request.URL.Query(), identity.GroupListing)
	if err != nil {
		return err
	}
	groups, meta, err := s.store.Groups.List(ctx, principal(c).OrgID, params)
	if err != nil {
		return err
	}
	writeList(c, viewsOf(groups, newGroupView), params.Fields, meta)
	return nil
}

// getGroup: GET /groups/{group_id}, {data: Group} with up to the first
// membersInGroup member ids; fields picks attributes.
func (s *Server) getGroup(c *gin.Context) error {
	ctx := c.Request.Context()
	params, err := listing.Parse(url.Values{"fields": c.Request.URL.Query()["fields"]}, groupDetail)
	if err != nil {
		return err
	}
	id, err := pathID(c, "group_id", identity.ErrGroupNotFound)
	if err != nil {
		return err
	}
	g, err := s.store.Groups.Get(ctx, principal(c).OrgID, id)
	if err != nil {
		return err
	}
	view := newGroupView(g)
	ids, err := s.store.Groups.MemberIDs(ctx, g.ID, membersInGroup)
	if err != nil {
		return err
	}
	members := make([]string, len(ids))
	for i, m := range ids {
		members[i] = models.FormatID(m)
	}
	view.Members = &members
	data := listing.Project([]groupView{view}, params.Fields)
	if len(params.Fields) == 0 {
		c.JSON(http.StatusOK, gin.H{"data": view})
		return nil
	}
	c.JSON(http.StatusOK, gin.H{"data": projectedOne{data}})
	return nil
}

// groupMembers: GET /groups/{group_id}/members, the member users with the
// parameters of GET /users when the token may also read users; otherwise
// each member as id, displayName and email only (memberSummary), filtered
// and sorted on those alone (models.MemberListing).
func (s *Server) groupMembers(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c, "group_id", identity.ErrGroupNotFound)
	if err != nil {
		return err
	}
	p := principal(c)
	if !auth.Allows(p.Scopes, userReadScopes) {
		return s.groupMemberSummaries(c, p.OrgID, id)
	}
	params, err := listing.Parse(c.Request.URL.Query(), identity.UserListing)
	if err != nil {
		return err
	}
	users, meta, err := s.store.Users.ListGroupMembers(ctx, p.OrgID, id, params)
	if err != nil {
		return err
	}
	return writeUserPage(c, users, params.Fields, meta)
}

// userReadScopes are the scopes that let a caller see whole user records.
var userReadScopes = Scopes("user", "READ", "ALL")

// memberSummary is a group member as a caller without a user read scope
// sees it.
type memberSummary struct {
	ID          string `json:"id"`
	DisplayName string `json:"displayName"`
	Email       string `json:"email"`
}

func (s *Server) groupMemberSummaries(c *gin.Context, orgID, groupID int64) error {
	ctx := c.Request.Context()
	params, err := listing.Parse(c.Request.URL.Query(), identity.MemberListing)
	if err != nil {
		return err
	}
	users, meta, err := s.store.Users.ListGroupMemberSummaries(ctx, orgID, groupID, params)
	if err != nil {
		return err
	}
	views := make([]memberSummary, len(users))
	for i := range users {
		views[i] = memberSummary{ID: models.FormatID(users[i].ID), DisplayName: users[i].DisplayName, Email: users[i].Email}
	}
	writeList(c, views, params.Fields, meta)
	return nil
}

// groupCreateRequest is the body of POST /groups: name is required;
// is_dynamic defaults to false; members (user ids) are for static groups,
// membership_rule is required for dynamic ones.
type groupCreateRequest struct {
	Name           string   `json:"name" validate:"required"`
	Description    string   `json:"description"`
	IsDynamic      bool     `json:"is_dynamic"`
	Members        []string `json:"members"`
	MembershipRule string   `json:"membership_rule"`
}

// createGroup: POST /groups, 201 {data: Group without members}. A dynamic
// group's members are computed by a job (membership_job_id).
func (s *Server) createGroup(c *gin.Context) error {
	ctx := c.Request.Context()
	var req groupCreateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	members, err := parseMemberIDs("members", req.Members)
	if err != nil {
		return err
	}
	g := &identity.Group{OrgID: principal(c).OrgID, Name: req.Name, Description: req.Description,
		IsDynamic: req.IsDynamic, MembershipRule: req.MembershipRule}
	var job *jobs.Job
	if g.IsDynamic {
		job = recomputeJob(c)
	}
	if err := s.store.Groups.Create(ctx, g, members, job); err != nil {
		return err
	}
	s.startRecompute(c, job)
	c.JSON(http.StatusCreated, gin.H{"data": newGroupView(g)})
	return nil
}

// groupPatchRequest is the body of PATCH /groups/{id}. is_dynamic cannot
// change; members change through /groups/{id}/members.
type groupPatchRequest struct {
	Name           *string `json:"name"`
	Description    *string `json:"description"`
	MembershipRule *string `json:"membership_rule"`
}

// updateGroup: PATCH /groups/{group_id}, {data: Group without members}. A
// changed membership_rule starts a recompute job.
func (s *Server) updateGroup(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c, "group_id", identity.ErrGroupNotFound)
	if err != nil {
		return err
	}
	var req groupPatchRequest
	if err = decodeJSON(c, &req); err != nil {
		return err
	}
	job := recomputeJob(c)
	g, err := s.store.Groups.Update(ctx, principal(c).OrgID, id,
		identity.GroupChange{Name: req.Name, Description: req.Description, MembershipRule: req.MembershipRule}, job)
	if err != nil {
		return err
	}
	s.startRecompute(c, job)
	c.JSON(http.StatusOK, gin.H{"data": newGroupView(g)})
	return nil
}

// deleteGroup: DELETE /groups/{group_id}, 204.
func (s *Server) deleteGroup(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c, "group_id", identity.ErrGroupNotFound)
	if err != nil {
		return err
	}
	if err := s.store.Groups.Delete(ctx, principal(c).OrgID, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// deleteGroups: DELETE /groups?ids=…, the bulk delete of spec 4.0 item 6.
func (s *Server) deleteGroups(c *gin.Context) error {
	return s.bulkDelete(c, identity.ErrGroupNotFound, s.store.Groups.DeleteMany)
}

// membersRequest is the body of POST /groups/{id}/members.
type membersRequest struct {
	Members []string `json:"members" validate:"required,min=1"`
}

// addGroupMembers: POST /groups/{group_id}/members, {data: Group}. Static
// groups only; every id must be a user of the organization or nothing is
// added.
func (s *Server) addGroupMembers(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c, "group_id", identity.ErrGroupNotFound)
	if err != nil {
		return err
	}
	var req membersRequest
	if err = decodeJSON(c, &req); err != nil {
		return err
	}
	ids, err := parseMemberIDs("members", req.Members)
	if err != nil {
		return err
	}
	g, err := s.store.Groups.AddMembers(ctx, principal(c).OrgID, id, ids)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newGroupView(g)})
	return nil
}

// removeGroupMembers: DELETE /groups/{group_id}/members?ids=…, {data:
// Group}. Static groups only; ids that are not members are ignored.
func (s *Server) removeGroupMembers(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c, "group_id", identity.ErrGroupNotFound)
	if err != nil {
		return err
	}
	raw, err := bulkIDs(c)
	if err != nil {
		return err
	}
	ids, err := parseMemberIDs("ids", raw)
	if err != nil {
		return err
	}
	g, err := s.store.Groups.RemoveMembers(ctx, principal(c).OrgID, id, ids)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newGroupView(g)})
	return nil
}

// parseMemberIDs reads user ids written as digit strings.
func parseMemberIDs(field string, raw []string) ([]int64, error) {
	ids := make([]int64, 0, len(raw))
	for _, r := range raw {
		id, err := models.ParseID(field, r)
		if err != nil {
			if field == "ids" {
				return nil, &listing.ParamError{Param: "ids", Detail: r + " is not a user id"}
			}
			return nil, models.Invalid(field, "%q is not a user id", r)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// projectedOne writes the one item of a listing.Project result as an
// object rather than an array.
type projectedOne struct{ items any }

// MarshalJSON writes the item.
func (p projectedOne) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(p.items)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, fmt.Errorf("projection is not an array: %.20s", b)
	}
	return b[1 : len(b)-1], nil
}
