package decide

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
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
	PolicyID string  `json:"policy_id"`
	Name     string  `json:"name"`
	Priority int64   `json:"priority"`
	Matched  bool    `json:"matched"`
	Reasons  Reasons `json:"reasons"`
}

// Reason is one reason, written out only when asked (String): a decision
// itself formats nothing. The frequent ones are plain values (no
// allocation); the others a function.
type Reason struct {
	f     func() string
	kind  uint8
	holds bool
	c     *condition
	p     *policy
	ip    netip.Addr
}

const (
	reasonFunc     uint8 = iota
	reasonIPNone         // condition c: ip is in none of its IP sources
	reasonCriteria       // policy p's expression is holds
)

// String writes the reason.
func (r Reason) String() string {
	switch r.kind {
	case reasonIPNone:
		return r.c.head + "address " + r.ip.String() + " is in none of the IP sources " + r.c.names + verdict(r.holds)
	case reasonCriteria:
		return "criteria: " + r.p.exprText + " is " + strconv.FormatBool(r.holds)
	}
	return r.f()
}

func verdict(holds bool) string {
	if holds {
		return ", so it holds"
	}
	return ", so it does not hold"
}

// Reasons are the reasons of one policy.
type Reasons []Reason

// Strings writes the reasons out.
func (r Reasons) Strings() []string {
	out := make([]string, len(r))
	for i, x := range r {
		out[i] = x.String()
	}
	return out
}

// MarshalJSON writes the reasons as an array of strings.
func (r Reasons) MarshalJSON() ([]byte, error) { return json.Marshal(r.Strings()) }

func text(s string) func() string { return func() string { return s } }

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
	// NotAssigned counts the policies before the deciding one that were not
	// considered because they are not assigned to the user.
	NotAssigned int `json:"not_assigned"`
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
	out := Decision{Decision: models.AccessDeny, Evaluated: make([]Evaluated, 0, 16)}
	if req.IP.IsValid() {
		req.IP = req.IP.Unmap().WithZone("") // an IPv4-mapped address is the IPv4 address
	}
	ev := evaluator{req: req, geo: geo}
	cands := s.candidates(req.UserID, req.UserGroups)
	for k, i := range cands {
		p := &s.policies[i]
		e := Evaluated{PolicyID: p.idText, Name: p.name, Priority: p.priority}
		st, ok := ev.applies(p, &e)
		e.Matched = ok
		out.Evaluated = append(out.Evaluated, e)
		if !ok {
			continue
		}
		out.NotAssigned = int(i) + 1 - (k + 1)
		out.Decision = p.access
		out.Policy = &PolicyRef{ID: p.idText, Name: p.name}
		out.PrimaryAuthentication = &st.src.PrimaryAuthentication
		out.SecondaryAuthentication = &st.src.SecondaryAuthentication
		out.EndpointAdvancedSettings = &st.src.AdvancedSettings
		adv := p.advanced
		out.AdvancedSettings = &adv
		return out
	}
	out.NotAssigned = len(s.policies) - len(cands)
	return out
}

type evaluator struct {
	req Request
	geo Locator
	// all: give the reasons of passed checks too (the policy applies);
	// otherwise only failed checks get a reason, so that the many policies
	// that do not apply cost no text.
	all bool
	// The request's hour of the week in each zone met, computed once.
	zones []zoneHour
	// The address's country, looked up once per decision.
	looked  bool
	country string
	why     string
}

type zoneHour struct {
	loc   *time.Location
	index int
	local time.Time
}

// hourIn returns the request's hour of the week (Sunday 00:00 is 0) and
// local time in loc.
func (ev *evaluator) hourIn(loc *time.Location) (int, time.Time) {
	for _, z := range ev.zones {
		if z.loc == loc {
			return z.index, z.local
		}
	}
	lt := ev.req.Time.In(loc)
	z := zoneHour{loc: loc, index: int(lt.Weekday())*24 + lt.Hour(), local: lt}
	ev.zones = append(ev.zones, z)
	return z.index, z.local
}

// applies reports whether the policy applies, with its reasons: every
// check for a policy that applies; for one that does not, the checks that
// failed and the criteria's value (what tells why not).
func (ev *evaluator) applies(p *policy, e *Evaluated) (*setting, bool) {
	ev.all = false
	st, ok := ev.check(p, e)
	if ok {
		// It applies: every check again, with its reason.
		ev.all = true
		e.Reasons = e.Reasons[:0]
		st, ok = ev.check(p, e)
	}
	return st, ok
}

// reason appends r unless it is nil (a passed check's reason, not asked for).
func (e *Evaluated) reason(r func() string) {
	if r != nil {
		e.Reasons = append(e.Reasons, Reason{f: r})
	}
}

// check runs the policy's checks, adding the reasons of those that failed,
// and of all when ev.all.
func (ev *evaluator) check(p *policy, e *Evaluated) (*setting, bool) {
	req := &ev.req
	// Users (assigned already).
	if ev.all {
		switch {
		case p.isDefault:
			e.reason(text("user: the default policy applies to every user"))
		case p.users[req.UserID]:
			e.reason(func() string { return "user: " + itoa(req.UserID) + " is assigned directly" })
		default:
			group := int64(0)
			for _, g := range req.UserGroups {
				if p.groups[g] {
					group = g
					break
				}
			}
			e.reason(func() string { return "user: " + itoa(req.UserID) + " is assigned through group " + itoa(group) })
		}
	}
	// Endpoint, action, device.
	st, why := ev.setting(p)
	e.reason(why)
	if st == nil {
		return nil, false
	}
	// Criteria.
	if p.broken != "" {
		e.reason(text("criteria: " + p.broken))
		return nil, false
	}
	if len(p.conds) == 0 {
		if ev.all {
			e.reason(text("criteria: no conditions"))
		}
		return st, true
	}
	var small [24]bool
	holds := small[:0]
	for i := range p.conds {
		c := &p.conds[i]
		if c.factor == models.FactorTypeIPAddress && ev.req.IP.IsValid() && len(c.configs) > 0 {
			// The frequent case, without a closure.
			in := ev.ipIn(c)
			ok := in != c.notIn
			holds = append(holds, ok)
			if !in && (ev.all || !ok) {
				e.Reasons = append(e.Reasons, Reason{kind: reasonIPNone, holds: ok, c: c, ip: ev.req.IP})
				continue
			}
			if !ev.all && ok {
				continue
			}
		}
		if len(holds) == i+1 {
			holds = holds[:i]
		}
		ok, reason := ev.condition(c)
		holds = append(holds, ok)
		e.reason(reason)
	}
	var ok bool
	if p.expr != nil {
		ok = p.prog.eval(holds)
		e.Reasons = append(e.Reasons, Reason{kind: reasonCriteria, holds: ok, p: p})
	} else {
		ok = true
		for _, h := range holds {
			ok = ok && h
		}
		e.reason(func() string { return "criteria: every condition (no expression) is " + strconv.FormatBool(ok) })
	}
	if !ok {
		return nil, false
	}
	return st, true
}

// setting finds the policy's setting of the request's endpoint that allows
// its action and protects its device.
func (ev *evaluator) setting(p *policy) (*setting, func() string) {
	req := &ev.req
	var misses []func() string
	for i := range p.settings {
		st := &p.settings[i]
		if st.endpoint != req.Endpoint {
			continue
		}
		if st.actions != nil {
			if !st.actions[req.Action] {
				misses = append(misses, func() string { return fmt.Sprintf("%s setting does not cover action %q", st.typ, req.Action) })
				continue
			}
		} else if req.Action != "" && req.Action != st.typ {
			misses = append(misses, func() string { return fmt.Sprintf("%s setting takes no action (%q asked)", st.typ, req.Action) })
			continue
		}
		if !ev.all && (st.endpoint != models.EndpointComputerDevices || req.DeviceID != 0 && ev.protects(st)) {
			return st, nil
		}
		if st.endpoint != models.EndpointComputerDevices {
			return st, func() string {
				return "endpoint: " + st.typ + " setting covers " + describeAction(req.Action)
			}
		}
		switch {
		case req.DeviceID == 0:
			misses = append(misses, text("ComputerDevices setting needs a device and none was given"))
			continue
		case st.allDevices:
			return st, func() string {
				return fmt.Sprintf("endpoint: ComputerDevices setting covers %s on every device", describeAction(req.Action))
			}
		case st.devices[req.DeviceID]:
			return st, func() string {
				return fmt.Sprintf("endpoint: ComputerDevices setting covers %s on device %d (assigned directly)", describeAction(req.Action), req.DeviceID)
			}
		}
		group := int64(0)
		for _, g := range req.DeviceGroups {
			if st.deviceGroups[g] {
				group = g
				break
			}
		}
		if group != 0 {
			return st, func() string {
				return fmt.Sprintf("endpoint: ComputerDevices setting covers %s on device %d (through device group %d)", describeAction(req.Action), req.DeviceID, group)
			}
		}
		misses = append(misses, func() string { return fmt.Sprintf("ComputerDevices setting does not protect device %d", req.DeviceID) })
	}
	if len(misses) == 0 {
		return nil, func() string { return fmt.Sprintf("endpoint: the policy has no %s setting", req.Endpoint) }
	}
	return nil, func() string {
		parts := make([]string, len(misses))
		for i, m := range misses {
			parts[i] = m()
		}
		return "endpoint: " + strings.Join(parts, "; ")
	}
}

// protects reports whether a ComputerDevices setting protects the device.
func (ev *evaluator) protects(st *setting) bool {
	if st.allDevices || st.devices[ev.req.DeviceID] {
		return true
	}
	for _, g := range ev.req.DeviceGroups {
		if st.deviceGroups[g] {
			return true
		}
	}
	return false
}

func describeAction(a string) string {
	if a == "" {
		return "the sign-in"
	}
	return fmt.Sprintf("action %q", a)
}

// condition evaluates one condition and says why (the text is made only
// when asked).
func (ev *evaluator) condition(c *condition) (bool, func() string) {
	var in bool
	var detail func() string
	switch c.factor {
	case models.FactorTypeIPAddress:
		in, detail = ev.inIPSources(c)
	case models.FactorTypeGeolocation:
		in, detail = ev.inLocations(c)
	case models.FactorTypeTime:
		in, detail = ev.inHours(c)
	default:
		return false, func() string { return fmt.Sprintf("condition %d (%s): unknown factor type", c.seq, c.factor) }
	}
	holds := in != c.notIn
	if holds && !ev.all {
		return true, nil
	}
	return holds, func() string {
		verdict := ", so it does not hold"
		if holds {
			verdict = ", so it holds"
		}
		return c.head + detail() + verdict
	}
}

// ipIn reports whether the request's address is in one of the condition's
// IP sources.
func (ev *evaluator) ipIn(c *condition) bool {
	for _, cfg := range c.configs {
		if cfg.broken == "" && cfg.containsIP(ev.req.IP) {
			return true
		}
	}
	return false
}

// quiet says that a condition's value in needs no reason: the condition
// holds and only failed checks are explained.
func (ev *evaluator) quiet(c *condition, in bool) bool { return !ev.all && in != c.notIn }

func names(cs []*config) string {
	b := make([]byte, 0, 32*len(cs))
	for i, c := range cs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendQuote(b, c.name)
		b = append(b, " ("...)
		b = strconv.AppendInt(b, c.id, 10)
		b = append(b, ')')
	}
	return string(b)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// named is the config's quoted name and id.
func named(c *config) string { return strconv.Quote(c.name) + " (" + itoa(c.id) + ")" }

func (ev *evaluator) inIPSources(c *condition) (bool, func() string) {
	ip := ev.req.IP
	if !ip.IsValid() {
		return false, text("no address was given")
	}
	for _, cfg := range c.configs {
		if cfg.broken == "" && cfg.containsIP(ip) {
			if ev.quiet(c, true) {
				return true, nil
			}
			hit := cfg
			return true, func() string { return "address " + ip.String() + " is in IP source " + named(hit) }
		}
	}
	if ev.quiet(c, false) {
		return false, nil
	}
	if len(c.configs) == 0 {
		return false, func() string { return fmt.Sprintf("address %s: the condition names no IP source", ip) }
	}
	return false, func() string { return "address " + ip.String() + " is in none of the IP sources " + c.names }
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

func (ev *evaluator) inLocations(c *condition) (bool, func() string) {
	country, why := ev.lookup()
	ip := ev.req.IP
	if country == "" {
		for _, cfg := range c.configs {
			if cfg.broken == "" && cfg.unknownIn {
				hit := cfg
				return true, func() string {
					return fmt.Sprintf("address %s has an unknown location (%s), which geolocation %q (%d) includes", ip, why, hit.name, hit.id)
				}
			}
		}
		return false, func() string {
			return fmt.Sprintf("address %s has an unknown location (%s), which none of %s includes", ip, why, names(c.configs))
		}
	}
	for _, cfg := range c.configs {
		if cfg.broken == "" && cfg.countries[country] {
			hit := cfg
			return true, func() string {
				return fmt.Sprintf("address %s is in %s, a country of geolocation %q (%d)", ip, country, hit.name, hit.id)
			}
		}
	}
	return false, func() string {
		return fmt.Sprintf("address %s is in %s, in none of the geolocations %s", ip, country, names(c.configs))
	}
}

func (ev *evaluator) inHours(c *condition) (bool, func() string) {
	t := ev.req.Time
	const layout = "Mon 15:04 MST"
	for _, cfg := range c.configs {
		if cfg.broken != "" {
			continue
		}
		idx, local := ev.hourIn(cfg.loc)
		if cfg.hours[idx] {
			if ev.quiet(c, true) {
				return true, nil
			}
			hit := cfg
			return true, func() string {
				return t.UTC().Format(time.RFC3339) + " is " + local.Format(layout) + ", inside business hours " + named(hit)
			}
		}
	}
	if ev.quiet(c, false) {
		return false, nil
	}
	return false, func() string {
		var outside []string
		for _, cfg := range c.configs {
			if cfg.broken != "" {
				outside = append(outside, fmt.Sprintf("%q (%d) is unreadable: %s", cfg.name, cfg.id, cfg.broken))
				continue
			}
			outside = append(outside, fmt.Sprintf("%s in %q (%d)", t.In(cfg.loc).Format(layout), cfg.name, cfg.id))
		}
		return fmt.Sprintf("%s is outside business hours: %s", t.UTC().Format(time.RFC3339), strings.Join(outside, "; "))
	}
}
