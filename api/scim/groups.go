package scim

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/identity"
	mscim "iam/models/scim"
)

// groupVersion is a group's ETag: its last change and member count.
func groupVersion(g *identity.Group) string {
	return `W/"` + strconv.FormatInt(g.UpdatedAt.UnixNano(), 36) + "-" + strconv.FormatInt(g.MembersCount, 36) + `"`
}

// groupDoc is the SCIM Group of g; members nil leaves them out.
func groupDoc(c *gin.Context, g *identity.Group, members []mscim.Member) doc {
	d := doc{
		"schemas":     []any{mscim.GroupSchema},
		"id":          models.FormatID(g.ID),
		"displayName": g.Name,
		"meta": doc{"resourceType": "Group", "created": rfc3339(g.WhenCreated), "lastModified": rfc3339(g.UpdatedAt),
			"location": location(c, "Groups", g.ID), "version": groupVersion(g)},
	}
	if g.ExternalID != "" {
		d["externalId"] = g.ExternalID
	}
	if members != nil {
		list := make([]any, len(members))
		for i, m := range members {
			name := m.DisplayName
			if name == "" {
				name = m.Email
			}
			list[i] = doc{"value": models.FormatID(m.UserID), "display": name, "type": "User", "$ref": location(c, "Users", m.UserID)}
		}
		d["members"] = list
	}
	return d
}

// memberIDs reads the user ids of member values ([{"value": "<id>"}]):
// invalidValue for one that is no id.
func memberIDs(v any) ([]int64, error) {
	var list []any
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []any:
		list = v
	case doc:
		list = []any{v}
	default:
		return nil, invalidValue("members must be a list of objects with a value")
	}
	if len(list) > MaxValues {
		return nil, tooMany("an operation holds at most " + strconv.Itoa(MaxValues) + " members")
	}
	ids := make([]int64, 0, len(list))
	for _, e := range list {
		m, ok := e.(doc)
		if !ok {
			return nil, invalidValue("members must be a list of objects with a value")
		}
		s, err := getString(m, "value")
		if err != nil {
			return nil, err
		}
		id, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if perr != nil || id <= 0 {
			return nil, invalidValue("members: " + strconv.Quote(s) + " is not the id of a user")
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// writeGroup answers the group with its members unless projected out
// (excludedAttributes=members reads none).
func (s *Server) writeGroup(c *gin.Context, status int, g *identity.Group, proj projection) error {
	var members []mscim.Member
	if proj.wants("members") {
		byGroup, err := s.store.SCIM.Members(c.Request.Context(), g.OrgID, []int64{g.ID})
		if err != nil {
			return err
		}
		members = byGroup[g.ID]
		if members == nil {
			members = []mscim.Member{}
		}
	}
	c.Header("ETag", groupVersion(g))
	if status == http.StatusCreated {
		c.Header("Location", location(c, "Groups", g.ID))
	}
	writeJSON(c, status, proj.apply(groupDoc(c, g, members)))
	return nil
}

func queryProjection(c *gin.Context) (projection, error) {
	return projectionOf(c.Query("attributes"), c.Query("excludedAttributes"))
}

// GetGroup serves GET /Groups/{id}.
func (s *Server) GetGroup(c *gin.Context) error {
	id, err := parseID(c, identity.ErrGroupNotFound)
	if err != nil {
		return err
	}
	proj, err := queryProjection(c)
	if err != nil {
		return err
	}
	g, err := s.store.Groups.Get(c.Request.Context(), orgOf(c), id)
	if err != nil {
		return err
	}
	return s.writeGroup(c, http.StatusOK, g, proj)
}

// groupInput reads the attributes of a POST or PUT group.
func groupInput(d doc) (name, externalID string, members []int64, err error) {
	if name, err = getString(d, "displayName"); err != nil {
		return
	}
	if strings.TrimSpace(name) == "" {
		err = invalidValue("displayName is required")
		return
	}
	if externalID, err = getString(d, "externalId"); err != nil {
		return
	}
	v, _ := get(d, "members")
	members, err = memberIDs(v)
	return
}

// CreateGroup serves POST /Groups (a static group). 409 uniqueness for a taken
// displayName.
func (s *Server) CreateGroup(c *gin.Context) error {
	var d doc
	if err := decode(c, &d); err != nil {
		return err
	}
	name, ext, members, err := groupInput(d)
	if err != nil {
		return err
	}
	proj, err := queryProjection(c)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	g := &identity.Group{OrgID: orgOf(c), Name: name, ExternalID: ext}
	if err = s.store.Groups.CreateStatic(ctx, g, members); err != nil {
		return err
	}
	if g, err = s.store.Groups.Get(ctx, g.OrgID, g.ID); err != nil {
		return err
	}
	return s.writeGroup(c, http.StatusCreated, g, proj)
}

// ReplaceGroup serves PUT /Groups/{id}: its displayName, externalId and members
// become those sent.
func (s *Server) ReplaceGroup(c *gin.Context) error {
	id, err := parseID(c, identity.ErrGroupNotFound)
	if err != nil {
		return err
	}
	var d doc
	if err = decode(c, &d); err != nil {
		return err
	}
	name, ext, members, err := groupInput(d)
	if err != nil {
		return err
	}
	proj, err := queryProjection(c)
	if err != nil {
		return err
	}
	if members == nil {
		members = []int64{}
	}
	edit := identity.GroupEdit{Name: &name, ExternalID: &ext, ReplaceMembers: &members}
	g, err := s.editGroup(c, id, edit)
	if err != nil {
		return err
	}
	return s.writeGroup(c, http.StatusOK, g, proj)
}

// editGroup runs edit with the If-Match check, and the mutability answer
// for members of a dynamic group.
func (s *Server) editGroup(c *gin.Context, id int64, edit identity.GroupEdit) (*identity.Group, error) {
	members := edit.ReplaceMembers != nil || edit.RemoveAll || len(edit.Add) > 0 || len(edit.Remove) > 0
	edit.Check = func(g *identity.Group) error {
		if err := checkVersion(c, groupVersion(g)); err != nil {
			return err
		}
		if members && g.IsDynamic {
			return mutability("a dynamic group's members are computed from its rule and cannot be changed")
		}
		return nil
	}
	return s.store.Groups.Edit(c.Request.Context(), orgOf(c), id, edit)
}

// memberSet accumulates a PATCH's member changes in order: an add undoes
// an earlier remove of the same user and the reverse.
type memberSet struct {
	replace   *[]int64
	removeAll bool
	add       map[int64]bool
	remove    map[int64]bool
	order     []int64
}

func (m *memberSet) doAdd(ids []int64) {
	for _, id := range ids {
		delete(m.remove, id)
		if !m.add[id] {
			m.add[id] = true
			m.order = append(m.order, id)
		}
	}
}

func (m *memberSet) doRemove(ids []int64) {
	for _, id := range ids {
		delete(m.add, id)
		m.remove[id] = true
	}
}

func (m *memberSet) clear(replace []int64) {
	m.add, m.remove, m.order = map[int64]bool{}, map[int64]bool{}, nil
	if replace == nil {
		m.replace, m.removeAll = nil, true
		return
	}
	m.replace, m.removeAll = &replace, false
}

// PatchGroup serves PATCH /Groups/{id}: displayName and externalId; members
// added, removed (by value list or members[value eq "…"]) and replaced,
// set-based whatever their number (no member is read).
func (s *Server) PatchGroup(c *gin.Context) error {
	id, err := parseID(c, identity.ErrGroupNotFound)
	if err != nil {
		return err
	}
	ops, err := decodePatch(c)
	if err != nil {
		return err
	}
	proj, err := queryProjection(c)
	if err != nil {
		return err
	}
	var edit identity.GroupEdit
	set := &memberSet{add: map[int64]bool{}, remove: map[int64]bool{}}
	for i, op := range ops {
		if err = applyGroupOp(&edit, set, op); err != nil {
			return prefixErr(i, err)
		}
	}
	edit.ReplaceMembers, edit.RemoveAll = set.replace, set.removeAll
	for _, id := range set.order {
		if set.add[id] {
			edit.Add = append(edit.Add, id)
		}
	}
	for id := range set.remove {
		edit.Remove = append(edit.Remove, id)
	}
	g, err := s.editGroup(c, id, edit)
	if err != nil {
		return err
	}
	if c.Query("attributes") == "" && c.Query("excludedAttributes") == "" && g.MembersCount > 1000 {
		// A large group's answer leaves its members out unless asked.
		proj.exclude = append(proj.exclude, mscim.Path{Attr: "members"})
	}
	return s.writeGroup(c, http.StatusOK, g, proj)
}

func prefixErr(i int, err error) error {
	var se *scimError
	if errors.As(err, &se) {
		return &scimError{status: se.status, scimType: se.scimType, detail: "operation " + strconv.Itoa(i+1) + ": " + se.detail}
	}
	return err
}

// applyGroupOp adds one PATCH operation to edit and set.
func applyGroupOp(edit *identity.GroupEdit, set *memberSet, op patchOp) error {
	v, err := decodeValue(op.Value)
	if err != nil {
		return err
	}
	path := strings.TrimSpace(op.Path)
	if path == "" {
		if op.Op == "remove" {
			return noTarget("remove needs a path")
		}
		m, ok := v.(doc)
		if !ok {
			return invalidValue("an operation without a path needs an object value")
		}
		for k, sub := range m {
			if err = groupAttr(edit, set, op.Op, strings.ToLower(k), nil, sub); err != nil {
				return err
			}
		}
		return nil
	}
	p, vp, err := mscim.ParsePatchPath(path)
	if err != nil {
		return invalidPath(err.Error())
	}
	if p.URN != "" && !strings.EqualFold(p.URN, mscim.GroupSchema) {
		return invalidPath("unknown schema " + p.URN)
	}
	name := strings.ToLower(p.Attr)
	if p.Sub != "" {
		if name == "members" && strings.EqualFold(p.Sub, "value") {
			return groupAttr(edit, set, op.Op, name, nil, v)
		}
		return invalidPath(path + " is not an attribute of a group")
	}
	return groupAttr(edit, set, op.Op, name, vp, v)
}

// groupAttr applies an operation on one attribute of a group.
func groupAttr(edit *identity.GroupEdit, set *memberSet, op, name string, vp *mscim.ValuePath, v any) error {
	switch name {
	case "id", "meta", "schemas":
		if vp == nil && op != "remove" {
			return nil // a path-less value may repeat them (Entra)
		}
		return mutability(name + " is read-only")
	case "displayname", "externalid":
		var s string
		if op != "remove" {
			str, ok := v.(string)
			if !ok {
				return invalidValue(name + " must be a string")
			}
			s = str
		}
		if name == "displayname" {
			if op == "remove" {
				return mutability("displayName is required")
			}
			edit.Name = &s
		} else {
			edit.ExternalID = &s
		}
		return nil
	case "members":
		if vp != nil {
			ids, err := filterMemberIDs(vp)
			if err != nil {
				return err
			}
			if op != "remove" {
				return invalidPath("members[...] takes remove; add members with a list of values")
			}
			set.doRemove(ids)
			return nil
		}
		ids, err := memberIDs(v)
		if err != nil {
			return err
		}
		switch op {
		case "add":
			set.doAdd(ids)
		case "replace":
			if ids == nil {
				ids = []int64{}
			}
			set.clear(ids)
		case "remove":
			if v == nil {
				set.clear(nil)
			} else {
				set.doRemove(ids)
			}
		}
		return nil
	}
	return invalidPath(name + " is not an attribute of a group")
}

// filterMemberIDs reads the ids of members[value eq "…" or value eq "…"].
func filterMemberIDs(vp *mscim.ValuePath) ([]int64, error) {
	var ids []int64
	var walk func(e mscim.Expr) error
	walk = func(e mscim.Expr) error {
		switch e := e.(type) {
		case *mscim.Logical:
			if e.Op != "or" {
				return invalidFilter()
			}
			if err := walk(e.Left); err != nil {
				return err
			}
			return walk(e.Right)
		case *mscim.Compare:
			if !strings.EqualFold(e.Path.Attr, "value") || e.Op != "eq" || e.Value.Kind != "string" {
				return invalidFilter()
			}
			id, err := strconv.ParseInt(e.Value.Text, 10, 64)
			if err != nil {
				return nil // no user has this id: nothing to remove
			}
			ids = append(ids, id)
			return nil
		}
		return invalidFilter()
	}
	return ids, walk(vp.Filter)
}

func invalidFilter() error {
	return newError(http.StatusBadRequest, "invalidFilter", `members are selected by value eq "<id>" (joined by or)`)
}

// DeleteGroup serves DELETE /Groups/{id}.
func (s *Server) DeleteGroup(c *gin.Context) error {
	id, err := parseID(c, identity.ErrGroupNotFound)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	if c.GetHeader("If-Match") != "" {
		// Checked on the row the delete locks: no write slips in between.
		err = s.store.Groups.DeleteIf(ctx, orgOf(c), id, func(g *identity.Group) error { return checkVersion(c, groupVersion(g)) })
	} else {
		err = s.store.Groups.Delete(ctx, orgOf(c), id)
	}
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// ListGroups serves GET /Groups.
func (s *Server) ListGroups(c *gin.Context) error {
	q, err := searchOfQuery(c)
	if err != nil {
		return err
	}
	return s.listGroups(c, q)
}

// SearchGroups serves POST /Groups/.search.
func (s *Server) SearchGroups(c *gin.Context) error {
	q, err := searchOfBody(c)
	if err != nil {
		return err
	}
	return s.listGroups(c, q)
}

func (s *Server) listGroups(c *gin.Context, q search) error {
	ctx := c.Request.Context()
	org := orgOf(c)
	groups, total, err := s.store.SCIM.ListGroups(ctx, org, q.query)
	if err != nil {
		return err
	}
	var members map[int64][]mscim.Member
	if q.proj.wants("members") && len(groups) > 0 {
		ids := make([]int64, len(groups))
		for i := range groups {
			ids[i] = groups[i].ID
		}
		if members, err = s.store.SCIM.Members(ctx, org, ids); err != nil {
			return err
		}
	}
	resources := make([]any, len(groups))
	for i := range groups {
		var m []mscim.Member
		if members != nil {
			if m = members[groups[i].ID]; m == nil {
				m = []mscim.Member{}
			}
		}
		resources[i] = q.proj.apply(groupDoc(c, &groups[i], m))
	}
	writeJSON(c, http.StatusOK, listResponse(total, q.query.StartIndex, resources))
	return nil
}
