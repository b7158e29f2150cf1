package api

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/decide"
	"iam/models/devices"
	"iam/models/identity"
	"iam/models/protection"
	"iam/models/store"
)

// Conditional access decisions: admins ask "what if" at
// POST /protection/conditional-access-policies/evaluate; device agents ask
// at logon at POST /agent/v1/authorize. Both answer decide.Decide over the
// organization's cached snapshot (docs/protection.md).

// decisionSource reads snapshots for the decision cache from the store.
type decisionSource struct{ store *store.Store }

func (d decisionSource) ProtectionVersion(ctx context.Context, orgID int64) (int64, error) {
	return d.store.DeviceGroups.ProtectionVersion(ctx, orgID)
}

func (d decisionSource) LoadEnabledPolicies(ctx context.Context, orgID int64) (*protection.PolicySet, error) {
	return d.store.Policies.LoadEnabledPolicies(ctx, orgID)
}

type evaluateRequest struct {
	UserID   string `json:"user_id" validate:"required,max=20"`
	DeviceID string `json:"device_id" validate:"max=20"`
	Endpoint string `json:"endpoint" validate:"required,max=64"`
	Action   string `json:"action" validate:"max=64"`
	IP       string `json:"ip" validate:"required,max=64"`
	Time     string `json:"time" validate:"max=64"`
}

// parseDecisionIP reads the request's address (IPv4, IPv6, or IPv4-mapped).
func parseDecisionIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, models.Invalid("ip", "must be an IPv4 or IPv6 address")
	}
	return a, nil
}

// decideFor fills the request's user and device groups (read with the
// protection version in one query) and decides.
// ENOTFOUND for a user or device not of the organization.
func (s *Server) decideFor(ctx context.Context, orgID int64, req decide.Request) (*decide.Decision, error) {
	f, err := s.store.DeviceGroups.DecisionFacts(ctx, orgID, req.UserID, req.DeviceID)
	if err != nil {
		return nil, err
	}
	if !f.UserExists {
		return nil, identity.ErrUserNotFound
	}
	if req.DeviceID != 0 && !f.DeviceExists {
		return nil, devices.DeviceNotFound(req.DeviceID)
	}
	req.UserGroups, req.DeviceGroups = f.UserGroups, f.DeviceGroups
	snap, err := s.decisions.At(ctx, orgID, f.Version)
	if err != nil {
		return nil, err
	}
	var geo decide.Locator
	if s.deps.Geo != nil {
		geo = s.deps.Geo
	}
	d := decide.Decide(snap, req, geo)
	return &d, nil
}

// evaluatePolicies: POST /protection/conditional-access-policies/evaluate,
// {data: decision}.
func (s *Server) evaluatePolicies(c *gin.Context) error {
	var in evaluateRequest
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	userID, err := models.ParseID("user_id", in.UserID)
	if err != nil {
		return err
	}
	req := decide.Request{UserID: userID, Endpoint: in.Endpoint, Action: in.Action, Time: time.Now().UTC()}
	if !slices.Contains(protection.Endpoints, in.Endpoint) {
		return models.Invalid("endpoint", "must be one of %s", strings.Join(protection.Endpoints, ", "))
	}
	if in.DeviceID != "" {
		if req.DeviceID, err = models.ParseID("device_id", in.DeviceID); err != nil {
			return err
		}
	}
	if req.IP, err = parseDecisionIP(in.IP); err != nil {
		return err
	}
	if in.Time != "" {
		if req.Time, err = time.Parse(time.RFC3339, in.Time); err != nil {
			return models.Invalid("time", "must be an RFC 3339 date-time")
		}
	}
	d, err := s.decideFor(c.Request.Context(), principal(c).OrgID, req)
	if err != nil {
		return err
	}
	return writeDecision(c, d)
}

// decisionBuffers hold the answers being written: an answer lists every
// policy considered with its reasons (about 250 bytes each), so a buffer
// of its size is reused rather than grown for each request. Buffers grown
// past maxPooledDecision are left to the collector.
var decisionBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

const maxPooledDecision = 1 << 20

// writeDecision answers {data: decision}, written by hand (AppendJSON),
// with its length (not chunked).
func writeDecision(c *gin.Context, d *decide.Decision) error {
	bp := decisionBuffers.Get().(*[]byte)
	buf := append((*bp)[:0], `{"data":`...)
	buf, err := d.AppendJSON(buf)
	if err != nil {
		return err
	}
	buf = append(buf, '}')
	c.Header("Content-Length", strconv.Itoa(len(buf)))
	c.Data(http.StatusOK, "application/json; charset=utf-8", buf)
	// Data has copied the answer to the connection's buffer or written it.
	if cap(buf) <= maxPooledDecision {
		*bp = buf[:0]
		decisionBuffers.Put(bp)
	}
	return nil
}

type agentAuthorizeRequest struct {
	UserID   string `json:"user_id" validate:"max=20"`
	UserName string `json:"user_name" validate:"max=320"`
	Action   string `json:"action" validate:"required,max=64"`
	IP       string `json:"ip" validate:"required,max=64"`
}

// agentAuthorize: POST /agent/v1/authorize. A device agent asks, at logon,
// what the organization's policies decide for a user doing action on this
// device from ip, now (endpoint ComputerDevices). {data: decision}.
func (s *Server) agentAuthorize(c *gin.Context) error {
	dev, err := s.agentDevice(c, s.store.Devices.Authenticate)
	if err != nil {
		return err
	}
	var in agentAuthorizeRequest
	if err = decodeJSON(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	req := decide.Request{DeviceID: dev.ID, Endpoint: protection.EndpointComputerDevices, Action: in.Action, Time: time.Now().UTC()}
	switch {
	case in.UserID != "":
		if req.UserID, err = models.ParseID("user_id", in.UserID); err != nil {
			return err
		}
	case in.UserName != "":
		var u *identity.User
		if u, err = s.store.Users.GetByEmail(ctx, dev.OrgID, strings.TrimSpace(in.UserName)); err != nil {
			return err
		}
		req.UserID = u.ID
	default:
		return models.Invalid("user_id", "name the user by user_id or user_name")
	}
	if req.IP, err = parseDecisionIP(in.IP); err != nil {
		return err
	}
	d, err := s.decideFor(ctx, dev.OrgID, req)
	if err != nil {
		return err
	}
	return writeDecision(c, d)
}
