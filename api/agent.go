package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"iam/models"
	"iam/models/lru"
)

// The agent channel (/agent/v1): device agents register with their
// organization's installation key and check in with their device
// credential, outside the OAuth API. The server never reaches out to a
// device; every device-side effect is a command waiting for its next
// check-in.

// DeviceScheme is the authorization scheme of a device credential:
// "Authorization: Device <device_id>:<device_secret>".
const DeviceScheme = "Device"

// Agent channel defaults.
const (
	// DefaultAgentMaxBody caps register and check-in bodies.
	DefaultAgentMaxBody = 2 << 20
	// DefaultAgentRate and DefaultAgentBurst bound each device's requests:
	// a burst, then one per second.
	DefaultAgentRate  = 1.0
	DefaultAgentBurst = 10
	// agentLimiters is how many devices' limiters a process keeps.
	agentLimiters = 200_000
)

// agentLimits holds each device's rate limiter.
type agentLimits struct {
	rate  rate.Limit
	burst int
	cache *lru.Cache[int64, *rate.Limiter]
}

func newAgentLimits(r float64, burst int) *agentLimits {
	if r <= 0 {
		r = DefaultAgentRate
	}
	if burst <= 0 {
		burst = DefaultAgentBurst
	}
	return &agentLimits{rate: rate.Limit(r), burst: burst, cache: lru.New[int64, *rate.Limiter](agentLimiters)}
}

// allow reports whether the device may be served now, and if not, in how
// many seconds it may try again.
func (l *agentLimits) allow(deviceID int64) (bool, int) {
	lim, ok := l.cache.Get(deviceID)
	if !ok {
		lim = rate.NewLimiter(l.rate, l.burst)
		l.cache.Put(deviceID, lim)
	}
	r := lim.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, int(d/time.Second) + 1
	}
	return true, 0
}

func errDeviceUnauthorized(detail string) *apiError {
	return newAPIError(http.StatusUnauthorized, CodeUnauthorized, "Unauthorized", detail)
}

// agentError keeps the store's own detail for a refused credential or key.
func agentError(err error) error {
	var me *models.Error
	if errors.As(err, &me) && me.Code == models.EUNAUTHORIZED {
		return errDeviceUnauthorized(me.Detail)
	}
	return err
}

type agentRegisterRequest struct {
	InstallationKey string             `json:"installation_key" validate:"required,max=256"`
	AgentType       string             `json:"agent_type" validate:"required"`
	Platform        string             `json:"platform" validate:"required"`
	Facts           models.DeviceFacts `json:"facts"`
}

type agentRegisterResponse struct {
	DeviceID               string `json:"device_id"`
	DeviceSecret           string `json:"device_secret"`
	CheckinIntervalSeconds int64  `json:"checkin_interval_seconds"`
}

// agentRegister admits a device (POST /agent/v1/register).
func (s *Server) agentRegister(c *gin.Context) error {
	var req agentRegisterRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	dev, sec, err := s.store.Devices.Register(c.Request.Context(), models.Registration{
		InstallationKey: req.InstallationKey, AgentType: req.AgentType, Platform: req.Platform,
		Facts: req.Facts, Interval: s.cfg.AgentCheckinInterval,
	})
	if err != nil {
		return agentError(err)
	}
	c.JSON(http.StatusCreated, agentRegisterResponse{DeviceID: models.FormatID(dev.ID), DeviceSecret: sec,
		CheckinIntervalSeconds: dev.CheckinIntervalSeconds})
	return nil
}

// agentCommand is a command as the agent receives it: its arguments at the
// top level beside id and type.
type agentCommand map[string]any

func newAgentCommand(cmd models.Command) agentCommand {
	out := agentCommand{}
	_ = json.Unmarshal(cmd.Args, (*map[string]any)(&out))
	out["id"] = models.FormatID(cmd.ID)
	out["type"] = cmd.Type
	return out
}

type agentSettings struct {
	AccountLinking *models.AccountLinkingSettings `json:"account_linking,omitempty"`
	OfflineMFA     *models.OfflineMFASettings     `json:"offline_mfa,omitempty"`
}

// agentSettingsTTL is how long a process reuses an organization's settings
// for check-in answers: a change reaches the agents within it.
const agentSettingsTTL = 5 * time.Second

type cachedSettings struct {
	at  time.Time
	set agentSettings
}

// agentSettingsOf returns the settings sent to an organization's agents,
// read at most once per agentSettingsTTL.
func (s *Server) agentSettingsOf(c *gin.Context, orgID int64) (agentSettings, error) {
	if cs, ok := s.agentSettings.Get(orgID); ok && time.Since(cs.at) < agentSettingsTTL {
		return cs.set, nil
	}
	ctx := c.Request.Context()
	linking, err := s.store.Devices.LinkingSettings(ctx, orgID)
	if err != nil {
		return agentSettings{}, err
	}
	admin, err := s.store.Settings.Get(ctx, orgID)
	if err != nil {
		return agentSettings{}, err
	}
	set := agentSettings{AccountLinking: linking, OfflineMFA: &admin.OfflineMFA}
	s.agentSettings.Put(orgID, cachedSettings{at: time.Now(), set: set})
	return set, nil
}

// offlineMFAFor narrows the organization's offline MFA settings to what a
// device receives (OfflineMFASettings.ForDevice): enabled only for a device
// named in devices_assignment.device_ids or a member of a device group in
// group_ids. The device's groups are read only when it matters.
func (s *Server) offlineMFAFor(c *gin.Context, dev *models.Device, org *models.OfflineMFASettings) (*models.OfflineMFASettings, error) {
	if org == nil {
		return nil, nil
	}
	var groups []int64
	if org.IsEnabled && len(org.DevicesAssignment.GroupIDs) > 0 && !org.AssignsDevice(dev.ID, nil) {
		var err error
		if groups, err = s.store.DeviceGroups.GroupsOfDevice(c.Request.Context(), dev.OrgID, dev.ID); err != nil {
			return nil, err
		}
	}
	out := org.ForDevice(dev.ID, groups)
	return &out, nil
}

type agentCheckinResponse struct {
	Commands           []agentCommand `json:"commands"`
	Settings           agentSettings  `json:"settings"`
	NextCheckinSeconds int64          `json:"next_checkin_seconds"`
}

// agentDevice authenticates the device credential of an agent request and
// applies the device's rate limit (shared by check-ins and authorizations).
func (s *Server) agentDevice(c *gin.Context) (*models.Device, error) {
	scheme, cred, _ := strings.Cut(c.GetHeader("Authorization"), " ")
	if scheme != DeviceScheme {
		return nil, errDeviceUnauthorized("send Authorization: Device <device_id>:<device_secret>")
	}
	id, sec, err := models.ParseDeviceCredential(strings.TrimSpace(cred))
	if err != nil {
		return nil, agentError(err)
	}
	dev, err := s.store.Devices.Authenticate(c.Request.Context(), id, sec)
	if err != nil {
		return nil, agentError(err)
	}
	if ok, wait := s.agentLimits.allow(dev.ID); !ok {
		ae := newAPIError(http.StatusTooManyRequests, CodeRateLimited, "Too Many Requests", "the device checks in too often")
		ae.RetryAfter = wait
		return nil, ae
	}
	return dev, nil
}

// agentCheckin records a check-in and answers the device's commands and
// settings (POST /agent/v1/checkin).
func (s *Server) agentCheckin(c *gin.Context) error {
	dev, err := s.agentDevice(c)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	var in models.CheckIn
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := in.Validate(); err != nil {
		return err
	}
	cmds, err := s.store.Devices.CheckIn(ctx, dev, &in)
	if err != nil {
		return agentError(err)
	}
	out := agentCheckinResponse{Commands: make([]agentCommand, 0, len(cmds)), NextCheckinSeconds: dev.CheckinIntervalSeconds}
	for _, cmd := range cmds {
		out.Commands = append(out.Commands, newAgentCommand(cmd))
	}
	if dev.UninstallRequestedAt == nil {
		if out.Settings, err = s.agentSettingsOf(c, dev.OrgID); err != nil {
			return err
		}
		if out.Settings.OfflineMFA, err = s.offlineMFAFor(c, dev, out.Settings.OfflineMFA); err != nil {
			return err
		}
	}
	c.JSON(http.StatusOK, out)
	return nil
}
