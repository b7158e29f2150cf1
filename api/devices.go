package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/devices"
	"iam/models/identity"
	"iam/models/listing"
)

// deviceAccountsView is device_accounts of spec 2.3.
type deviceAccountsView struct {
	Total  int64 `json:"total_local_accounts"`
	Linked int64 `json:"linked_local_accounts"`
}

// deviceView is a device as the API shows it (spec 2.3).
type deviceView struct {
	ID                 string             `json:"id"`
	Name               string             `json:"name"`
	OSType             string             `json:"os_type"`
	OSDistribution     string             `json:"os_distribution"`
	OSMajorVersion     string             `json:"os_major_version"`
	OSReleaseName      string             `json:"os_release_name"`
	OSBuildVersion     string             `json:"os_build_version"`
	SerialNumber       string             `json:"serial_number"`
	IPAddress          string             `json:"ip_address"`
	AgentStatus        string             `json:"agent_status"`
	AgentVersion       string             `json:"agent_version"`
	IsAgentOutdated    bool               `json:"is_agent_outdated"`
	AgentInstalledTime time.Time          `json:"agent_installed_time"`
	JoinType           string             `json:"join_type"`
	IsDeactivated      bool               `json:"is_deactivated"`
	DeviceAccounts     deviceAccountsView `json:"device_accounts"`
	DateAdded          time.Time          `json:"date_added"`
	LastContactTime    *time.Time         `json:"last_contact_time"`
	Domain             string             `json:"domain"`
	Tenant             string             `json:"tenant"`
	DNSHostname        string             `json:"dns_hostname"`
	Container          string             `json:"container"`
	ManagedBy          string             `json:"managed_by"`
	Owner              string             `json:"owner"`
	MDM                string             `json:"mdm"`
	Description        string             `json:"description"`
	// PossibleDuplicateOf is the live device of the same machine this one
	// registered beside without its credential (models.Register); null
	// otherwise, and once an admin deleted either.
	PossibleDuplicateOf *string `json:"possible_duplicate_of"`
}

func newDeviceView(d *devices.Device, status string, outdated bool) deviceView {
	return deviceView{
		ID: models.FormatID(d.ID), Name: d.Name, OSType: d.OSType, OSDistribution: d.OSDistribution,
		OSMajorVersion: d.OSMajorVersion, OSReleaseName: d.OSReleaseName, OSBuildVersion: d.OSBuildVersion,
		SerialNumber: d.SerialNumber, IPAddress: d.IPAddress, AgentStatus: status, AgentVersion: d.AgentVersion,
		IsAgentOutdated: outdated, AgentInstalledTime: d.AgentInstalledTime.UTC(), JoinType: d.JoinType,
		IsDeactivated: d.IsDeactivated, DeviceAccounts: deviceAccountsView{d.TotalLocalAccounts, d.LinkedLocalAccounts},
		DateAdded: d.DateAdded.UTC(), LastContactTime: utcPtr(d.LastContactTime), Domain: d.Domain, Tenant: d.Tenant,
		DNSHostname: d.DNSHostname, Container: d.Container, ManagedBy: d.ManagedBy, Owner: d.Owner, MDM: d.MDM,
		Description: d.Description, PossibleDuplicateOf: idPtr(d.PossibleDuplicateOf),
	}
}

func deviceID(c *gin.Context) (int64, error) {
	id, err := models.ParseID("device_id", c.Param("device_id"))
	if err != nil {
		return 0, models.NotFound("Device", "no device with the id "+c.Param("device_id"))
	}
	return id, nil
}

// listDevices: GET /devices, cursor paging.
func (s *Server) listDevices(c *gin.Context) error {
	params, err := listing.Parse(c.Request.URL.Query(), devices.DeviceListing)
	if err != nil {
		return err
	}
	devices, meta, err := s.store.Devices.List(c.Request.Context(), principal(c).OrgID, params, s.packages.versions())
	if err != nil {
		return err
	}
	views := make([]deviceView, len(devices))
	for i := range devices {
		views[i] = newDeviceView(&devices[i], devices[i].ListedAgentStatus, devices[i].IsAgentOutdated)
	}
	writeList(c, views, params.Fields, meta)
	return nil
}

// getDevice: GET /devices/{device_id}, the device at top level.
func (s *Server) getDevice(c *gin.Context) error {
	id, err := deviceID(c)
	if err != nil {
		return err
	}
	d, err := s.store.Devices.Get(c.Request.Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, newDeviceView(d, d.AgentStatus(time.Now()), s.packages.versions().Outdated(d)))
	return nil
}

// deleteDevice: DELETE /devices/{device_id} (spec 3): a SvcJoined device
// is deleted, any other stays inactive; either way its agent gets an
// uninstall command. 200 with {data: {id, deleted, agent_status}}.
func (s *Server) deleteDevice(c *gin.Context) error {
	id, err := deviceID(c)
	if err != nil {
		return err
	}
	d, err := s.store.Devices.Delete(c.Request.Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": gin.H{"id": models.FormatID(d.ID), "deleted": d.DeletedAt != nil,
		"agent_status": d.AgentStatus(time.Now()), "uninstall_requested": true}})
	return nil
}

// idpUserDetails is idp_user_details of spec 2.4.
type idpUserDetails struct {
	UserID      int64      `json:"user_id"`
	UserName    string     `json:"user_name"`
	DisplayName string     `json:"display_name"`
	LinkType    string     `json:"link_type"`
	LinkStatus  string     `json:"link_status"`
	LinkedAt    *time.Time `json:"linked_at"`
}

// accountView is a local account (spec 2.4).
type accountView struct {
	ID              int64           `json:"id"`
	UserName        string          `json:"user_name"`
	PermissionLevel string          `json:"permission_level"`
	LastLogin       *time.Time      `json:"last_login"`
	IsIdpLinked     bool            `json:"is_idp_linked"`
	LinkStatus      string          `json:"link_status"`
	IdpUserID       *string         `json:"idp_user_id"`
	IdpUserDetails  *idpUserDetails `json:"idp_user_details"`
}

func newAccountView(a *devices.LocalAccount, users map[int64]identity.User) accountView {
	v := accountView{ID: a.ID, UserName: a.UserName, PermissionLevel: a.PermissionLevel, LastLogin: utcPtr(a.LastLogin),
		IsIdpLinked: a.LinkStatus == devices.LinkLinked, LinkStatus: a.LinkStatus}
	if a.IdpUserID != nil {
		id := models.FormatID(*a.IdpUserID)
		u := users[*a.IdpUserID]
		v.IdpUserID = &id
		v.IdpUserDetails = &idpUserDetails{UserID: *a.IdpUserID, UserName: u.Email, DisplayName: u.DisplayName,
			LinkType: a.LinkType, LinkStatus: a.LinkStatus, LinkedAt: utcPtr(a.LinkedAt)}
	}
	return v
}

func (s *Server) accountViews(c *gin.Context, accs []devices.LocalAccount) ([]accountView, error) {
	var ids []int64
	for _, a := range accs {
		if a.IdpUserID != nil {
			ids = append(ids, *a.IdpUserID)
		}
	}
	users, err := s.store.Devices.UserNames(c.Request.Context(), principal(c).OrgID, ids)
	if err != nil {
		return nil, err
	}
	out := make([]accountView, len(accs))
	for i := range accs {
		out[i] = newAccountView(&accs[i], users)
	}
	return out, nil
}

// listAccounts: GET /devices/{device_id}/accounts, offset paging.
func (s *Server) listAccounts(c *gin.Context) error {
	params, err := listing.Parse(c.Request.URL.Query(), devices.LocalAccountListing)
	if err != nil {
		return err
	}
	id, err := deviceID(c)
	if err != nil {
		return err
	}
	accs, meta, err := s.store.Devices.ListAccounts(c.Request.Context(), principal(c).OrgID, id, params)
	if err != nil {
		return err
	}
	views, err := s.accountViews(c, accs)
	if err != nil {
		return err
	}
	writeList(c, views, params.Fields, meta)
	return nil
}

func accountIDs(c *gin.Context) (int64, int64, error) {
	dev, err := deviceID(c)
	if err != nil {
		return 0, 0, err
	}
	acc, err := models.ParseID("account_id", c.Param("account_id"))
	if err != nil {
		return 0, 0, models.NotFound("Local Account", "no local account with the id "+c.Param("account_id")+" on the device")
	}
	return dev, acc, nil
}

func (s *Server) answerAccount(c *gin.Context, a *devices.LocalAccount) error {
	views, err := s.accountViews(c, []devices.LocalAccount{*a})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": views[0]})
	return nil
}

// accountRequest reads a link action's device and account from the path,
// answers 404 for an account that is not the organization's before any
// error of the body, then decodes the body into req (an empty body is
// allowed when optional).
func (s *Server) accountRequest(c *gin.Context, req any, optional bool) (dev, acc int64, err error) {
	if dev, acc, err = accountIDs(c); err != nil {
		return 0, 0, err
	}
	if _, err := s.store.Devices.Account(c.Request.Context(), principal(c).OrgID, dev, acc); err != nil {
		return 0, 0, err
	}
	if optional && c.Request.ContentLength == 0 {
		return dev, acc, nil
	}
	return dev, acc, decodeJSON(c, req)
}

type linkRequest struct {
	PermissionLevel string `json:"permission_level" validate:"required"`
	IdpUserID       string `json:"idp_user_id" validate:"required"`
}

// linkAccount: POST .../accounts/{account_id}/link: unlinked → pending_link
// with a link command for the device.
func (s *Server) linkAccount(c *gin.Context) error {
	var req linkRequest
	dev, acc, err := s.accountRequest(c, &req, false)
	if err != nil {
		return err
	}
	p := principal(c)
	uid, err := models.ParseID("idp_user_id", req.IdpUserID)
	if err != nil {
		return err
	}
	a, err := s.store.Devices.Link(c.Request.Context(), p.OrgID, dev, acc, devices.LinkRequest{
		UserID: uid, PermissionLevel: req.PermissionLevel, LinkType: devices.LinkManual, Actor: models.FormatID(p.UserID)})
	if err != nil {
		return err
	}
	return s.answerAccount(c, a)
}

// cancelLink: POST .../accounts/{account_id}/cancel-link: pending_link →
// unlinked, the link command withdrawn.
func (s *Server) cancelLink(c *gin.Context) error {
	dev, acc, err := accountIDs(c)
	if err != nil {
		return err
	}
	p := principal(c)
	a, err := s.store.Devices.CancelLink(c.Request.Context(), p.OrgID, dev, acc, models.FormatID(p.UserID))
	if err != nil {
		return err
	}
	return s.answerAccount(c, a)
}

type unlinkRequest struct {
	Reason string `json:"reason" validate:"max=1000"`
}

// unlinkAccount: POST .../accounts/{account_id}/unlink {reason?}: linked →
// unlinked at once, an unlink command for the device.
func (s *Server) unlinkAccount(c *gin.Context) error {
	var req unlinkRequest
	dev, acc, err := s.accountRequest(c, &req, true)
	if err != nil {
		return err
	}
	p := principal(c)
	a, err := s.store.Devices.Unlink(c.Request.Context(), p.OrgID, dev, acc, models.FormatID(p.UserID), req.Reason)
	if err != nil {
		return err
	}
	return s.answerAccount(c, a)
}

// getLinkingSettings: GET /device-account-linking.
func (s *Server) getLinkingSettings(c *gin.Context) error {
	set, err := s.store.Devices.LinkingSettings(c.Request.Context(), principal(c).OrgID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": set})
	return nil
}

// patchLinkingSettings: PATCH /device-account-linking, any fields of 2.5.
func (s *Server) patchLinkingSettings(c *gin.Context) error {
	patch, err := decodePatch(c)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	org := principal(c).OrgID
	cur, err := s.store.Devices.LinkingSettings(ctx, org)
	if err != nil {
		return err
	}
	var next devices.AccountLinkingSettings
	if err := mergeRequest(cur, patch, nil, &next); err != nil {
		return err
	}
	if err := s.store.Devices.PutLinkingSettings(ctx, org, &next); err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": next})
	return nil
}

// offlineUserView is an offline-enrolled user (spec 2.6).
type offlineUserView struct {
	ID                     string          `json:"id"`
	DisplayName            string          `json:"display_name"`
	UserName               string          `json:"user_name"`
	SamAccountName         string          `json:"sam_account_name"`
	LocalAccountName       string          `json:"local_account_name"`
	EnrolledTime           *time.Time      `json:"enrolled_time"`
	PrimarySource          json.RawMessage `json:"primary_source"`
	EnrolledAuthenticators json.RawMessage `json:"enrolled_authenticators"`
}

func orJSON(b json.RawMessage, def string) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage(def)
	}
	return b
}

// listOfflineUsers: GET /devices/{device_id}/offline-enrolled-users.
func (s *Server) listOfflineUsers(c *gin.Context) error {
	params, err := listing.Parse(c.Request.URL.Query(), devices.OfflineUserListing)
	if err != nil {
		return err
	}
	id, err := deviceID(c)
	if err != nil {
		return err
	}
	users, meta, err := s.store.Devices.ListOfflineUsers(c.Request.Context(), principal(c).OrgID, id, params)
	if err != nil {
		return err
	}
	views := make([]offlineUserView, len(users))
	for i, u := range users {
		views[i] = offlineUserView{ID: models.FormatID(u.UserID), DisplayName: u.DisplayName, UserName: u.UserName,
			SamAccountName: u.SamAccountName, LocalAccountName: u.LocalAccountName, EnrolledTime: utcPtr(u.EnrolledTime),
			PrimarySource: orJSON(u.PrimarySource, "null"), EnrolledAuthenticators: orJSON(u.EnrolledAuthenticators, "[]")}
	}
	writeList(c, views, params.Fields, meta)
	return nil
}

var errOfflineUserNotFound = models.NotFound("Offline User", "the user is not enrolled offline on the device")

// deleteOfflineUsers: DELETE /devices/{device_id}/offline-enrolled-users?ids=
// (bulk); each removed entry leaves the list and the device gets a
// remove_offline_user command.
func (s *Server) deleteOfflineUsers(c *gin.Context) error {
	id, err := deviceID(c)
	if err != nil {
		return err
	}
	if _, err := s.store.Devices.Get(c.Request.Context(), principal(c).OrgID, id); err != nil {
		return err
	}
	return s.bulkDelete(c, errOfflineUserNotFound, func(ctx context.Context, orgID int64, ids []int64) ([]int64, error) {
		return s.store.Devices.RemoveOfflineUsers(ctx, orgID, id, ids)
	})
}

// deleteOfflineUser: DELETE /devices/{device_id}/offline-enrolled-users/{user_id}, 204.
func (s *Server) deleteOfflineUser(c *gin.Context) error {
	id, err := deviceID(c)
	if err != nil {
		return err
	}
	uid, err := models.ParseID("user_id", c.Param("user_id"))
	if err != nil {
		return errOfflineUserNotFound
	}
	removed, err := s.store.Devices.RemoveOfflineUsers(c.Request.Context(), principal(c).OrgID, id, []int64{uid})
	if err != nil {
		return err
	}
	if len(removed) == 0 {
		return errOfflineUserNotFound
	}
	c.Status(http.StatusNoContent)
	return nil
}

// linkEventView is an entry of the link history.
type linkEventView struct {
	ID         string    `json:"id"`
	DeviceID   string    `json:"device_id"`
	DeviceName string    `json:"device_name"`
	AccountID  *string   `json:"account_id"`
	UserName   string    `json:"user_name"`
	IdpUserID  *string   `json:"idp_user_id"`
	Action     string    `json:"action"`
	LinkType   string    `json:"link_type"`
	OldState   string    `json:"old_state"`
	NewState   string    `json:"new_state"`
	Reason     string    `json:"reason"`
	Actor      string    `json:"actor"`
	JobID      *string   `json:"job_id"`
	CreatedAt  time.Time `json:"created_at"`
}

func idPtr(id *int64) *string {
	if id == nil {
		return nil
	}
	s := models.FormatID(*id)
	return &s
}

// linkHistory: GET /device-account-linking/history, offset paging, newest first.
func (s *Server) linkHistory(c *gin.Context) error {
	params, err := listing.Parse(c.Request.URL.Query(), devices.LinkHistoryListing)
	if err != nil {
		return err
	}
	events, meta, err := s.store.Devices.ListHistory(c.Request.Context(), principal(c).OrgID, params)
	if err != nil {
		return err
	}
	views := make([]linkEventView, len(events))
	for i, e := range events {
		views[i] = linkEventView{ID: models.FormatID(e.ID), DeviceID: models.FormatID(e.DeviceID), DeviceName: e.DeviceName,
			AccountID: idPtr(e.AccountID), UserName: e.UserName, IdpUserID: idPtr(e.IdpUserID), Action: e.Action,
			LinkType: e.LinkType, OldState: e.OldState, NewState: e.NewState, Reason: e.Reason, Actor: e.Actor,
			JobID: idPtr(e.JobID), CreatedAt: e.CreatedAt.UTC()}
	}
	writeList(c, views, params.Fields, meta)
	return nil
}
