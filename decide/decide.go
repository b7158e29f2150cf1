package decide

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"iam/models"
)

// Request is one question: may this user, on this endpoint (and device),
// doing this action, from this address, at this time, get in, and how?
// UserGroups and DeviceGroups are the user's groups (static and dynamic
// memberships) and the device's device groups, read by the caller.
type Request struct {
	UserID       int64
	UserGroups   []int64
	DeviceID     int64 // 0: no device
	DeviceGroups []int64
	Endpoint     string
	Action       string
	IP           netip.Addr
	Time         time.Time
}

// Locator finds the country of an address (ISO 3166-1 alpha-2, upper
// case); "" when unknown. Why says, for reasons, why an address is unknown.
type Locator interface {
	Country(netip.Addr) (country string, why string)
}

// PolicyRef names the deciding policy.
type PolicyRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Evaluated is one policy considered, in priority order, and why it
// matched or not.
type Evaluated struct {
	PolicyID string   `json:"policy_id"`
	Name     string   `json:"name"`
	Priority int64    `json:"priority"`
	Matched  bool     `json:"matched"`
	Reasons  []string `json:"reasons"`
}

// Decision is the answer: allow or deny, the deciding policy, what it asks
// for, and every policy considered.
type Decision struct {
	Decision                 string                           `json:"decision"`
	Policy                   *PolicyRef                       `json:"policy"`
	PrimaryAuthentication    *models.PrimaryAuthentication    `json:"primary_authentication"`
	SecondaryAuthentication  *models.SecondaryAuthentication  `json:"secondary_authentication"`
	AdvancedSettings         *models.PolicyAdvancedSettings   `json:"advanced_settings"`
	EndpointAdvancedSettings *models.EndpointAdvancedSettings `json:"endpoint_advanced_settings"`
	Evaluated                []Evaluated                      `json:"evaluated"`
}

// Decide evaluates the snapshot's policies in priority order (1 first, the
// default policy last) and stops at the first that applies: its user
// assignments reach the user (directly or through a group; the default
// policy reaches everyone), it has a setting of the endpoint whose type
// allows the action, that setting protects the device (ComputerDevices:
// the device directly, one of its device groups, or all devices), and its
// criteria hold. That policy's access type is the decision. No policy
// applying is a deny.
func Decide(s *Snapshot, req Request, geo Locator) Decision {
	out := Decision{Decision: models.AccessDeny, Evaluated: make([]Evaluated, 0, 4)}
	if req.IP.IsValid() {
		req.IP = req.IP.Unmap().WithZone("") // an IPv4-mapped address is the IPv4 address
	}
	ev := evaluator{req: req, geo: geo}
	for i := range s.policies {
		p := &s.policies[i]
		e := Evaluated{PolicyID: models.FormatID(p.id), Name: p.name, Priority: p.priority}
		st, ok := ev.applies(p, &e)
		e.Matched = ok
		out.Evaluated = append(out.Evaluated, e)
		if !ok {
			continue
		}
		out.Decision = p.access
		out.Policy = &PolicyRef{ID: models.FormatID(p.id), Name: p.name}
		out.PrimaryAuthentication = &st.src.PrimaryAuthentication
		out.SecondaryAuthentication = &st.src.SecondaryAuthentication
		out.EndpointAdvancedSettings = &st.src.AdvancedSettings
		adv := p.advanced
		out.AdvancedSettings = &adv
		return out
	}
	return out
}

type evaluator struct {
	req Request
	geo Locator
	// The address's country, looked up once per decision.
	looked  bool
	country string
	why     string
}

func (ev *evaluator) applies(p *policy, e *Evaluated) (*setting, bool) {
	req := ev.req
	// Users.
	switch {
	case p.isDefault:
		e.Reasons = append(e.Reasons, "user: the default policy applies to every user")
	case p.users[req.UserID]:
		e.Reasons = append(e.Reasons, fmt.Sprintf("user: %d is assigned directly", req.UserID))
	default:
		group := int64(0)
		for _, g := range req.UserGroups {
			if p.groups[g] {
				group = g
				break
			}
		}
		if group == 0 {
			e.Reasons = append(e.Reasons, fmt.Sprintf("user: %d is not assigned, directly or through a group", req.UserID))
			return nil, false
		}
		e.Reasons = append(e.Reasons, fmt.Sprintf("user: %d is assigned through group %d", req.UserID, group))
	}
	// Endpoint, action, device.
	st, why := ev.setting(p)
	e.Reasons = append(e.Reasons, why)
	if st == nil {
		return nil, false
	}
	// Criteria.
	if p.broken != "" {
		e.Reasons = append(e.Reasons, "criteria: "+p.broken)
		return nil, false
	}
	if len(p.conds) == 0 {
		e.Reasons = append(e.Reasons, "criteria: no conditions")
		return st, true
	}
	holds := make(map[int]bool, len(p.conds))
	for i := range p.conds {
		c := &p.conds[i]
		ok, reason := ev.condition(c)
		holds[c.seq] = ok
		e.Reasons = append(e.Reasons, reason)
	}
	var ok bool
	if p.expr != nil {
		ok = p.expr.Eval(func(n int) bool { return holds[n] })
		e.Reasons = append(e.Reasons, fmt.Sprintf("criteria: %s is %v", p.expr.String(), ok))
	} else {
		ok = true
		for _, h := range holds {
			ok = ok && h
		}
		e.Reasons = append(e.Reasons, fmt.Sprintf("criteria: every condition (no expression) is %v", ok))
	}
	if !ok {
		return nil, false
	}
	return st, true
}

// setting finds the policy's setting of the request's endpoint that allows
// its action and protects its device.
func (ev *evaluator) setting(p *policy) (*setting, string) {
	req := ev.req
	var misses []string
	for i := range p.settings {
		st := &p.settings[i]
		if st.endpoint != req.Endpoint {
			continue
		}
		if st.actions != nil {
			if !st.actions[req.Action] {
				misses = append(misses, fmt.Sprintf("%s setting does not cover action %q", st.typ, req.Action))
				continue
			}
		} else if req.Action != "" && req.Action != st.typ {
			misses = append(misses, fmt.Sprintf("%s setting takes no action (%q asked)", st.typ, req.Action))
			continue
		}
		if st.endpoint != models.EndpointComputerDevices {
			return st, fmt.Sprintf("endpoint: %s setting covers %s", st.typ, describeAction(req.Action))
		}
		switch {
		case req.DeviceID == 0:
			misses = append(misses, "ComputerDevices setting needs a device and none was given")
			continue
		case st.allDevices:
			return st, fmt.Sprintf("endpoint: ComputerDevices setting covers %s on every device", describeAction(req.Action))
		case st.devices[req.DeviceID]:
			return st, fmt.Sprintf("endpoint: ComputerDevices setting covers %s on device %d (assigned directly)", describeAction(req.Action), req.DeviceID)
		}
		group := int64(0)
		for _, g := range req.DeviceGroups {
			if st.deviceGroups[g] {
				group = g
				break
			}
		}
		if group != 0 {
			return st, fmt.Sprintf("endpoint: ComputerDevices setting covers %s on device %d (through device group %d)", describeAction(req.Action), req.DeviceID, group)
		}
		misses = append(misses, fmt.Sprintf("ComputerDevices setting does not protect device %d", req.DeviceID))
	}
	if len(misses) == 0 {
		return nil, fmt.Sprintf("endpoint: the policy has no %s setting", req.Endpoint)
	}
	return nil, "endpoint: " + strings.Join(misses, "; ")
}

func describeAction(a string) string {
	if a == "" {
		return "the sign-in"
	}
	return fmt.Sprintf("action %q", a)
}

// condition evaluates one condition and says why.
func (ev *evaluator) condition(c *condition) (bool, string) {
	cmp := models.ComparatorIn
	if c.notIn {
		cmp = models.ComparatorNotIn
	}
	head := fmt.Sprintf("condition %d (%s %s)", c.seq, c.factor, cmp)
	var in bool
	var detail string
	switch c.factor {
	case models.FactorTypeIPAddress:
		in, detail = ev.inIPSources(c)
	case models.FactorTypeGeolocation:
		in, detail = ev.inLocations(c)
	case models.FactorTypeTime:
		in, detail = ev.inHours(c)
	default:
		return false, fmt.Sprintf("%s: unknown factor type", head)
	}
	holds := in != c.notIn
	return holds, fmt.Sprintf("%s: %s, so it %s", head, detail, map[bool]string{true: "holds", false: "does not hold"}[holds])
}

func names(cs []*config) string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%q (%d)", c.name, c.id))
	}
	return strings.Join(out, ", ")
}

func (ev *evaluator) inIPSources(c *condition) (bool, string) {
	ip := ev.req.IP
	if !ip.IsValid() {
		return false, "no address was given"
	}
	for _, cfg := range c.configs {
		if cfg.broken == "" && cfg.containsIP(ip) {
			return true, fmt.Sprintf("address %s is in IP source %q (%d)", ip, cfg.name, cfg.id)
		}
	}
	if len(c.configs) == 0 {
		return false, fmt.Sprintf("address %s: the condition names no IP source", ip)
	}
	return false, fmt.Sprintf("address %s is in none of the IP sources %s", ip, names(c.configs))
}

func (ev *evaluator) lookup() (string, string) {
	if !ev.looked {
		ev.looked = true
		switch {
		case !ev.req.IP.IsValid():
			ev.why = "no address was given"
		case ev.geo == nil:
			ev.why = "no GeoIP database is configured (IAM_GEOIP_DB)"
		default:
			ev.country, ev.why = ev.geo.Country(ev.req.IP)
		}
	}
	return ev.country, ev.why
}

func (ev *evaluator) inLocations(c *condition) (bool, string) {
	country, why := ev.lookup()
	if country == "" {
		for _, cfg := range c.configs {
			if cfg.broken == "" && cfg.unknownIn {
				return true, fmt.Sprintf("address %s has an unknown location (%s), which geolocation %q (%d) includes", ev.req.IP, why, cfg.name, cfg.id)
			}
		}
		return false, fmt.Sprintf("address %s has an unknown location (%s), which none of %s includes", ev.req.IP, why, names(c.configs))
	}
	for _, cfg := range c.configs {
		if cfg.broken == "" && cfg.countries[country] {
			return true, fmt.Sprintf("address %s is in %s, a country of geolocation %q (%d)", ev.req.IP, country, cfg.name, cfg.id)
		}
	}
	return false, fmt.Sprintf("address %s is in %s, in none of the geolocations %s", ev.req.IP, country, names(c.configs))
}

func (ev *evaluator) inHours(c *condition) (bool, string) {
	t := ev.req.Time
	var outside []string
	for _, cfg := range c.configs {
		if cfg.broken != "" {
			outside = append(outside, fmt.Sprintf("%q (%d) is unreadable: %s", cfg.name, cfg.id, cfg.broken))
			continue
		}
		in, local := cfg.inHours(t)
		if in {
			return true, fmt.Sprintf("%s is %s, inside business hours %q (%d)", t.UTC().Format(time.RFC3339), local, cfg.name, cfg.id)
		}
		outside = append(outside, fmt.Sprintf("%s in %q (%d)", local, cfg.name, cfg.id))
	}
	return false, fmt.Sprintf("%s is outside business hours: %s", t.UTC().Format(time.RFC3339), strings.Join(outside, "; "))
}
