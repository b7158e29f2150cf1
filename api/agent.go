package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"iam/api/clientaddr"
	"iam/models"
	"iam/models/audit"
	"iam/models/devices"
	"iam/models/protection"
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
	// DefaultRegistrationsPerAddress and DefaultRegistrationsPerKey bound
	// registrations, per minute, from one client address and with one
	// installation key; each may come in a burst of as many.
	DefaultRegistrationsPerAddress = 60
	DefaultRegistrationsPerKey     = 600
	// DefaultMaxDevicesPerOrg caps an organization's devices (and,
	// apart, its NPS extension and IIS module installations).
	DefaultMaxDevicesPerOrg = 100_000
	// keyGuesses is how many registrations with a wrong installation key
	// one client address may make before it is refused (429); it regains
	// one a minute.
	keyGuesses = 10
	// agentLimiters is how many devices' limiters, and of their last
	// check-ins (reportMemo), a process keeps.
	agentLimiters = 200_000
	// registrationLimiters is how many client addresses' (and, apart,
	// installation keys') registration limiters a process keeps.
	registrationLimiters = 100_000
)

// keyLimits holds a token bucket per key: a device, a client address, an
// installation key. At most size buckets are kept, the least recently used
// going first, so memory is bounded whatever the callers send.
type keyLimits[K comparable] struct {
	rate  rate.Limit
	burst int
	cache *lru.Cache[K, *rate.Limiter]
}

func newKeyLimits[K comparable](r rate.Limit, burst, size int) *keyLimits[K] {
	return &keyLimits[K]{rate: r, burst: max(burst, 1), cache: newLRU[K, *rate.Limiter](size)}
}

// newLRU returns a least-recently-used cache of at most size entries (at
// least one). lru.New fails only for a size below one.
func newLRU[K comparable, V any](size int) *lru.Cache[K, V] {
	c, err := lru.New[K, V](max(size, 1))
	if err != nil {
		panic(err)
	}
	return c
}

// newAgentLimits is the limit of each device's requests: r per second, in
// bursts of burst.
func newAgentLimits(r float64, burst int) *keyLimits[int64] {
	if r <= 0 {
		r = DefaultAgentRate
	}
	if burst <= 0 {
		burst = DefaultAgentBurst
	}
	return newKeyLimits[int64](rate.Limit(r), burst, agentLimiters)
}

// perMinute is the limit of n requests a minute, in bursts of n.
func perMinute[K comparable](n, size int) *keyLimits[K] {
	return newKeyLimits[K](rate.Limit(float64(n)/60), n, size)
}

func (l *keyLimits[K]) bucket(key K) *rate.Limiter {
	lim, ok := l.cache.Get(key)
	if !ok {
		lim = rate.NewLimiter(l.rate, l.burst)
		l.cache.Add(key, lim)
	}
	return lim
}

// allow takes one request from key's bucket: whether it may be served now,
// and if not, in how many seconds it may try again.
func (l *keyLimits[K]) allow(key K) (bool, int) {
	r := l.bucket(key).Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, int(d/time.Second) + 1
	}
	return true, 0
}

// spent reports, without taking from it, whether key's bucket is empty,
// and if so in how many seconds it holds one request again.
func (l *keyLimits[K]) spent(key K) (bool, int) {
	lim, ok := l.cache.Get(key)
	if !ok {
		return false, 0
	}
	tokens := lim.Tokens()
	if tokens >= 1 {
		return false, 0
	}
	wait := time.Duration((1 - tokens) / float64(l.rate) * float64(time.Second))
	return true, int(wait/time.Second) + 1
}

// registrationLimits are the agent channel's limits of registrations
// (agentRegister): per client address, per installation key, and of
// wrong installation keys per client address.
type registrationLimits struct {
	perAddress *keyLimits[string]
	perKey     *keyLimits[[sha256.Size]byte]
	badKeys    *keyLimits[string]
}

func newRegistrationLimits(perAddress, perKey int) *registrationLimits {
	return &registrationLimits{
		perAddress: perMinute[string](cmp.Or(perAddress, DefaultRegistrationsPerAddress), registrationLimiters),
		perKey:     perMinute[[sha256.Size]byte](cmp.Or(perKey, DefaultRegistrationsPerKey), registrationLimiters),
		badKeys:    newKeyLimits[string](rate.Every(time.Minute), keyGuesses, registrationLimiters),
	}
}

func errTooManyRequests(detail string, wait int) *apiError {
	ae := newAPIError(http.StatusTooManyRequests, CodeRateLimited, "Too Many Requests", detail)
	ae.RetryAfter = wait
	return ae
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
	InstallationKey string              `json:"installation_key" validate:"required,max=256"`
	AgentType       string              `json:"agent_type" validate:"required"`
	Platform        string              `json:"platform" validate:"required"`
	Facts           devices.DeviceFacts `json:"facts"`
}

type agentRegisterResponse struct {
	DeviceID               string `json:"device_id"`
	DeviceSecret           string `json:"device_secret"`
	CheckinIntervalSeconds int64  `json:"checkin_interval_seconds"`
}

// agentRegister admits a device (POST /agent/v1/register). Before the
// store is asked: the client address (clientaddr.Key, under the trusted
// proxies' rules) must not have spent its wrong installation keys
// (keyGuesses), nor its registrations, and the installation key its
// registrations. A device agent registering again presents its current
// credential (Authorization: Device <device_id>:<device_secret>) to take
// its device over (models.DeviceStore.Register).
func (s *Server) agentRegister(c *gin.Context) error {
	addr := clientaddr.Key(c.Request, s.cfg.TrustedProxies)
	if spent, wait := s.registrations.badKeys.spent(addr); spent {
		return errTooManyRequests("too many registrations with a wrong installation key from this address", wait)
	}
	if ok, wait := s.registrations.perAddress.allow(addr); !ok {
		return errTooManyRequests("too many registrations from this address", wait)
	}
	var req agentRegisterRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if ok, wait := s.registrations.perKey.allow(sha256.Sum256([]byte(req.InstallationKey))); !ok {
		return errTooManyRequests("too many registrations with this installation key", wait)
	}
	reg := devices.Registration{
		InstallationKey: req.InstallationKey, AgentType: req.AgentType, Platform: req.Platform,
		Facts: req.Facts, Interval: s.cfg.AgentCheckinInterval, MaxDevices: s.cfg.MaxDevicesPerOrg,
	}
	// The registering agent is the actor; its device has no id yet (the
	// event's target has it).
	ctx := withActor(c, models.Actor{Type: models.ActorDevice, DisplayName: req.Facts.Name})
	var (
		id     int64
		secret string
		ivl    int64
		err    error
	)
	if devices.ServerAgent(req.AgentType) {
		// An NPS extension or IIS module: an installation, not a device.
		var in *devices.AgentInstallation
		if in, secret, err = s.store.Devices.RegisterInstallation(ctx, reg); err == nil {
			id, ivl = in.ID, int64(cmp.Or(s.cfg.AgentCheckinInterval, devices.DefaultCheckinInterval)/time.Second)
		}
	} else {
		if c.GetHeader("Authorization") != "" {
			if reg.DeviceID, reg.DeviceSecret, err = deviceCredential(c); err != nil {
				return err
			}
		}
		var dev *devices.Device
		if dev, secret, err = s.store.Devices.Register(ctx, reg); err == nil {
			id, ivl = dev.ID, dev.CheckinIntervalSeconds
		}
	}
	if errors.Is(err, devices.ErrBadInstallationKey) {
		s.registrations.badKeys.allow(addr)
	}
	if err != nil {
		s.registrationRefused(ctx, c, err)
		return agentError(err)
	}
	c.JSON(http.StatusCreated, agentRegisterResponse{DeviceID: models.FormatID(id), DeviceSecret: secret, CheckinIntervalSeconds: ivl})
	return nil
}

// registerRoute names the agent registration in its refusals' events.
const registerRoute = "POST /agent/v1/register"

// registrationRefused records access.denied for a registration refused once
// its installation key named the organization (a *devices.RegistrationRefusal:
// the device cap, a wrong or deleted device credential), as a refusal
// (rate-bounded, outside any transaction), the registering agent its actor
// and the route its target. A wrong installation key names no organization
// and is not recorded (it is counted by the address's key guesses).
func (s *Server) registrationRefused(ctx context.Context, c *gin.Context, err error) {
	var refused *devices.RegistrationRefusal
	if !errors.As(err, &refused) {
		return
	}
	reason := "registration refused"
	var me *models.Error
	if errors.As(refused.Err, &me) && me.Detail != "" {
		reason += ": " + me.Detail
	}
	ev := models.AuditEvent{OrgID: refused.OrgID, Type: audit.AccessDenied, Result: models.ResultDenied, Reason: reason,
		Targets: []models.EventTarget{{Type: RouteTargetType, ID: registerRoute, DisplayName: registerRoute}}}
	if err := s.store.Refusals.Record(ctx, ev); err != nil {
		logger(c).Warn("record a refused registration", "error", err)
	}
}

// agentCommand is a command as the agent receives it: its arguments at the
// top level beside id and type.
type agentCommand map[string]any

func newAgentCommand(cmd devices.Command) agentCommand {
	out := agentCommand{}
	_ = json.Unmarshal(cmd.Args, (*map[string]any)(&out))
	out["id"] = models.FormatID(cmd.ID)
	out["type"] = cmd.Type
	return out
}

type agentSettings struct {
	AccountLinking *devices.AccountLinkingSettings `json:"account_linking,omitempty"`
	OfflineMFA     *protection.OfflineMFASettings  `json:"offline_mfa,omitempty"`
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
	s.agentSettings.Add(orgID, cachedSettings{at: time.Now(), set: set})
	return set, nil
}

// reportMemo is what a process remembers of a device's last accepted
// check-in without acks: the SHA-256 of its body and the digest of what it
// reported (Device.ReportedDigest after it).
type reportMemo struct {
	raw    [sha256.Size]byte
	digest string
}

// agentReport reads a check-in's body. A device being uninstalled is
// never refused: its body is read for its acks only
// (models.UninstallCheckIn), anything else in it ignored. A body of the very bytes of the
// device's last accepted check-in without acks, while the device's row
// still holds that check-in's digest, is the same report: it is not
// decoded nor validated again (models.SameReport). Any other body is
// decoded and validated. It returns the body's SHA-256 too.
func (s *Server) agentReport(c *gin.Context, dev *devices.Device) (*devices.CheckIn, [sha256.Size]byte, error) {
	var raw [sha256.Size]byte
	if dev.UninstallRequestedAt != nil {
		// Only the acks count: the device must always be able to fetch
		// and acknowledge its uninstall, whatever else it sends.
		body, _ := io.ReadAll(c.Request.Body)
		var in struct {
			Acks []json.RawMessage `json:"acks"`
		}
		_ = json.Unmarshal(body, &in)
		return devices.UninstallCheckIn(in.Acks), raw, nil
	}
	if err := jsonMediaType(c); err != nil {
		return nil, raw, err
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return nil, raw, jsonError(err)
	}
	raw = sha256.Sum256(body)
	if m, ok := s.agentReports.Get(dev.ID); ok && m.raw == raw && m.digest == dev.ReportedDigest && dev.UninstallRequestedAt == nil {
		return devices.SameReport(m.digest), raw, nil
	}
	var in devices.CheckIn
	if err := decodeBody(body, &in); err != nil {
		return nil, raw, err
	}
	if err := in.Validate(); err != nil {
		return nil, raw, err
	}
	return &in, raw, nil
}

// offlineMFAFor narrows the organization's offline MFA settings to what a
// device receives (OfflineMFASettings.ForDevice): enabled only for a device
// named in devices_assignment.device_ids or a member of a device group in
// group_ids. The device's groups are read only when it matters.
func (s *Server) offlineMFAFor(c *gin.Context, dev *devices.Device, org *protection.OfflineMFASettings) (*protection.OfflineMFASettings, error) {
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

// agentDevice authenticates the device credential of an agent request with
// authenticate (check-ins read the pending commands in the same statement:
// DeviceStore.AuthenticateCheckIn) and applies the device's rate limit
// (shared by check-ins and authorizations).
func (s *Server) agentDevice(c *gin.Context, authenticate func(ctx context.Context, id int64, secret string) (*devices.Device, error)) (*devices.Device, error) {
	id, sec, err := deviceCredential(c)
	if err != nil {
		return nil, err
	}
	dev, err := authenticate(c.Request.Context(), id, sec)
	if err != nil {
		return nil, agentError(err)
	}
	if ok, wait := s.agentLimits.allow(dev.ID); !ok {
		return nil, errTooManyRequests("the device checks in too often", wait)
	}
	withActor(c, models.Actor{Type: models.ActorDevice, ID: models.FormatID(dev.ID), DisplayName: dev.Name})
	return dev, nil
}

// deviceCredential reads "Authorization: Device <device_id>:<device_secret>".
func deviceCredential(c *gin.Context) (int64, string, error) {
	scheme, cred, _ := strings.Cut(c.GetHeader("Authorization"), " ")
	if scheme != DeviceScheme {
		return 0, "", errDeviceUnauthorized("send Authorization: Device <device_id>:<device_secret>")
	}
	id, sec, err := devices.ParseDeviceCredential(strings.TrimSpace(cred))
	if err != nil {
		return 0, "", agentError(err)
	}
	return id, sec, nil
}

// agentCheckin records a check-in and answers the device's commands and
// settings (POST /agent/v1/checkin).
func (s *Server) agentCheckin(c *gin.Context) error {
	dev, err := s.agentDevice(c, s.store.Devices.AuthenticateCheckIn)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	in, raw, err := s.agentReport(c, dev)
	if err != nil {
		return err
	}
	cmds, err := s.store.Devices.CheckIn(ctx, dev, in)
	if err != nil {
		return agentError(err)
	}
	if len(in.Acks) == 0 && dev.UninstallRequestedAt == nil {
		s.agentReports.Add(dev.ID, reportMemo{raw: raw, digest: dev.ReportedDigest})
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
