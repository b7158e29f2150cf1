package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/listing"
	"iam/models/protection"
)

// Device groups (/protection/device-groups): named static sets of devices
// that conditional access policies and the offline MFA settings name
// (docs/protection.md, docs/decisions.md).

const deviceGroupsPath = "/protection/device-groups"

type deviceGroupView struct {
	ID               string    `json:"id"`
	Name             string    `json:"name"`
	Description      string    `json:"description"`
	MembersCount     int64     `json:"members_count"`
	CreatedTime      time.Time `json:"created_time"`
	LastModifiedTime time.Time `json:"last_modified_time"`
}

func newDeviceGroupView(g *protection.DeviceGroup) deviceGroupView {
	return deviceGroupView{ID: models.FormatID(g.ID), Name: g.Name, Description: g.Description, MembersCount: g.MembersCount,
		CreatedTime: g.CreatedAt, LastModifiedTime: g.UpdatedAt}
}

type deviceGroupMemberView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	OSType    string    `json:"os_type"`
	JoinType  string    `json:"join_type"`
	AddedTime time.Time `json:"added_time"`
}

type deviceGroupRequest struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	DeviceIDs   []string `json:"device_ids"`
}

type deviceGroupPatch struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
}

type deviceIDsRequest struct {
	DeviceIDs []string `json:"device_ids" validate:"required"`
}

// parseDeviceIDs reads device ids of a body field (EINVALID) or of the ids
// query (a parameter error).
func parseDeviceIDs(field string, raw []string) ([]int64, error) {
	if len(raw) > protection.MaxDeviceGroupMembersPerRequest {
		return nil, models.Invalid(field, "at most %d devices a request", protection.MaxDeviceGroupMembersPerRequest)
	}
	ids := make([]int64, 0, len(raw))
	for _, r := range raw {
		id, err := models.ParseID(field, r)
		if err != nil {
			if field == "ids" {
				return nil, &listing.ParamError{Param: "ids", Detail: r + " is not a device id"}
			}
			return nil, models.Invalid(field, "%q is not a device id", r)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// listDeviceGroups: GET /protection/device-groups (offset paging).
func (s *Server) listDeviceGroups(c *gin.Context) error {
	params, err := listing.Parse(c.Request.URL.Query(), protection.DeviceGroupListing)
	if err != nil {
		return err
	}
	list, meta, err := s.store.DeviceGroups.List(c.Request.Context(), principal(c).OrgID, params)
	if err != nil {
		return err
	}
	writeList(c, viewsOf(list, newDeviceGroupView), params.Fields, meta)
	return nil
}

// createDeviceGroup: POST /protection/device-groups, 201 {data: group}.
func (s *Server) createDeviceGroup(c *gin.Context) error {
	var req deviceGroupRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	ids, err := parseDeviceIDs("device_ids", req.DeviceIDs)
	if err != nil {
		return err
	}
	g := &protection.DeviceGroup{OrgID: principal(c).OrgID, Name: req.Name, Description: req.Description}
	if err := s.store.DeviceGroups.Create(c.Request.Context(), g, ids); err != nil {
		return err
	}
	c.JSON(http.StatusCreated, gin.H{"data": newDeviceGroupView(g)})
	return nil
}

// getDeviceGroup: GET /protection/device-groups/{device_group_id}.
func (s *Server) getDeviceGroup(c *gin.Context) error {
	id, err := pathID(c, "device_group_id", protection.ErrDeviceGroupNotFound)
	if err != nil {
		return err
	}
	g, err := s.store.DeviceGroups.Get(c.Request.Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newDeviceGroupView(g)})
	return nil
}

// updateDeviceGroup: PATCH /protection/device-groups/{device_group_id}:
// name and description; members change through the members routes.
func (s *Server) updateDeviceGroup(c *gin.Context) error {
	id, err := pathID(c, "device_group_id", protection.ErrDeviceGroupNotFound)
	if err != nil {
		return err
	}
	var req deviceGroupPatch
	if err = decodeJSON(c, &req); err != nil {
		return err
	}
	g, err := s.store.DeviceGroups.Update(c.Request.Context(), principal(c).OrgID, id,
		protection.DeviceGroupChange{Name: req.Name, Description: req.Description})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newDeviceGroupView(g)})
	return nil
}

// deleteDeviceGroup: DELETE /protection/device-groups/{device_group_id}, 204.
func (s *Server) deleteDeviceGroup(c *gin.Context) error {
	id, err := pathID(c, "device_group_id", protection.ErrDeviceGroupNotFound)
	if err != nil {
		return err
	}
	if err := s.store.DeviceGroups.Delete(c.Request.Context(), principal(c).OrgID, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// deviceGroupMembers: GET /protection/device-groups/{id}/members (offset
// paging).
func (s *Server) deviceGroupMembers(c *gin.Context) error {
	id, err := pathID(c, "device_group_id", protection.ErrDeviceGroupNotFound)
	if err != nil {
		return err
	}
	params, err := listing.Parse(c.Request.URL.Query(), protection.DeviceGroupMemberListing)
	if err != nil {
		return err
	}
	list, meta, err := s.store.DeviceGroups.Members(c.Request.Context(), principal(c).OrgID, id, params)
	if err != nil {
		return err
	}
	views := make([]deviceGroupMemberView, len(list))
	for i, m := range list {
		views[i] = deviceGroupMemberView{ID: models.FormatID(m.ID), Name: m.Name, OSType: m.OSType, JoinType: m.JoinType, AddedTime: m.AddedAt}
	}
	writeList(c, views, params.Fields, meta)
	return nil
}

// addDeviceGroupMembers: POST /protection/device-groups/{id}/members
// {device_ids}, {data: group}.
func (s *Server) addDeviceGroupMembers(c *gin.Context) error {
	id, err := pathID(c, "device_group_id", protection.ErrDeviceGroupNotFound)
	if err != nil {
		return err
	}
	var req deviceIDsRequest
	if err = decodeJSON(c, &req); err != nil {
		return err
	}
	ids, err := parseDeviceIDs("device_ids", req.DeviceIDs)
	if err != nil {
		return err
	}
	g, err := s.store.DeviceGroups.AddMembers(c.Request.Context(), principal(c).OrgID, id, ids)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newDeviceGroupView(g)})
	return nil
}

// removeDeviceGroupMembers: DELETE /protection/device-groups/{id}/members?ids=…,
// {data: group}; ids that are not members are ignored.
func (s *Server) removeDeviceGroupMembers(c *gin.Context) error {
	id, err := pathID(c, "device_group_id", protection.ErrDeviceGroupNotFound)
	if err != nil {
		return err
	}
	raw, err := bulkIDs(c)
	if err != nil {
		return err
	}
	ids, err := parseDeviceIDs("ids", raw)
	if err != nil {
		return err
	}
	g, err := s.store.DeviceGroups.RemoveMembers(c.Request.Context(), principal(c).OrgID, id, ids)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newDeviceGroupView(g)})
	return nil
}
