package decide

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"iam/models/protection"
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

// Reasons are the reasons of one policy considered, written out only when
// asked (Strings, MarshalJSON, Decision.AppendJSON): a decision records
// which policies it considered and which applied, nothing more, and the
// reasons are found again from the same snapshot and request (Decide is
// pure), so that the many policies that do not apply cost no text and no
// memory while deciding.
type Reasons struct {
	ev      *evaluator
	p       *policy
	matched bool
}

// Strings writes the reasons out.
func (r Reasons) Strings() []string {
	if r.ev == nil {
		return []string{}
	}
	list, _ := r.ev.explain(r.p, r.matched, nil)
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = x.String()
	}
	return out
}

// MarshalJSON writes the reasons as an array of strings.
func (r Reasons) MarshalJSON() ([]byte, error) {
	if r.ev == nil {
		return []byte("[]"), nil
	}
	b, _ := r.ev.appendReasons(nil, r.p, r.matched, nil)
	return b, nil
}

// reason is one reason. The frequent ones are plain values, written
// straight into an answer from fragments escaped at compile time; the
// others a function (those of the policy that applies, and of settings
// that do not cover the request).
type reason struct {
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
func (r reason) String() string {
	switch r.kind {
	case reasonIPNone:
		return r.c.head + "address " + r.ip.String() + " is in none of the IP sources " + r.c.names + verdict(r.holds)
	case reasonCriteria:
		return "criteria: " + r.p.exprText + " is " + strconv.FormatBool(r.holds)
	}
	return r.f()
}

// appendJSON appends the reason as a JSON string.
func (r reason) appendJSON(b []byte) []byte {
	switch r.kind {
	case reasonIPNone:
		b = append(b, '"')
		b = append(b, r.c.headJSON...)
		b = append(b, "address "...)
		b = r.ip.AppendTo(b) // digits, dots, colons and hex: nothing to escape
		b = append(b, " is in none of the IP sources "...)
		b = append(b, r.c.namesJSON...)
		b = append(b, verdict(r.holds)...)
		return append(b, '"')
	case reasonCriteria:
		b = append(b, `"criteria: `...)
		b = append(b, r.p.exprJSON...)
		b = append(b, " is "...)
		b = strconv.AppendBool(b, r.holds)
		return append(b, '"')
	}
	return appendString(b, r.f())
}

func verdict(holds bool) string {
	if holds {
		return ", so it holds"
	}
	return ", so it does not hold"
}

func text(s string) func() string { return func() string { return s } }

// Decision is the answer: allow or deny, the deciding policy, what it asks
// for, and every policy considered (Evaluated). The settings point into
// the snapshot: read them, do not change them. A Decision is read by one
// goroutine at a time.
type Decision struct {
	Decision                 string
	Policy                   *PolicyRef
	PrimaryAuthentication    *protection.PrimaryAuthentication
	SecondaryAuthentication  *protection.SecondaryAuthentication
	AdvancedSettings         *protection.PolicyAdvancedSettings
	EndpointAdvancedSettings *protection.EndpointAdvancedSettings
	// Considered counts the policies considered (Evaluated's length).
	Considered int
	// NotAssigned counts the policies before the deciding one that were not
	// considered because they are not assigned to the user.
	NotAssigned int

	ev *evaluator
	st *setting // the deciding policy's setting
}

// Evaluated lists the policies considered, in priority order, the
// deciding one last, each with its reasons.
func (d *Decision) Evaluated() []Evaluated {
	out := make([]Evaluated, 0, d.Considered)
	if d.ev == nil {
		return out
	}
	d.ev.considered(func(p *policy, matched bool) {
		out = append(out, Evaluated{PolicyID: p.idText, Name: p.name, Priority: p.priority, Matched: matched, Reasons: Reasons{ev: d.ev, p: p, matched: matched}})
	})
	return out
}

// Decide evaluates the snapshot's policies in priority order (1 first, the
// default policy last) and stops at the first that applies: its user
// assignments reach the user (directly or through a group; the default
// policy reaches everyone), it has a setting of the endpoint whose type
// allows the action, that setting protects the device (ComputerDevices:
// the device directly, one of its device groups, or all devices), and its
// criteria hold. That policy's access type is the decision. No policy
// applying is a deny.
//
// Deciding allocates once (the evaluator the answer keeps) whatever the
// number of policies: the policies assigned to the user are marked in a
// bitset (visited in priority order, no sorting), each condition is
// answered with integer comparisons against the compiled configs (IP
// ranges as integers, the request's hour of the week once per time zone,
// its country once), the criteria are evaluated over a bitset of the
// conditions' values, and no reason is written: Evaluated and AppendJSON
// find them again.
func Decide(s *Snapshot, req Request, geo Locator) Decision {
	if req.IP.IsValid() {
		req.IP = req.IP.Unmap().WithZone("") // an IPv4-mapped address is the IPv4 address
	}
	ev := &evaluator{snap: s, req: req, geo: geo, decided: -1}
	ev.prepare()
	out := Decision{Decision: protection.AccessDeny, ev: ev}
	k := 0
	for w, word := range ev.marks {
		for word != 0 {
			i := w<<6 + bits.TrailingZeros64(word)
			word &= word - 1
			p := &s.policies[i]
			st := ev.match(p)
			if st == nil {
				k++
				continue
			}
			ev.decided = i
			out.Considered = k + 1
			out.NotAssigned = i - k
			out.Decision = p.access
			out.Policy = &p.ref
			out.PrimaryAuthentication = &st.src.PrimaryAuthentication
			out.SecondaryAuthentication = &st.src.SecondaryAuthentication
			out.EndpointAdvancedSettings = &st.src.AdvancedSettings
			out.AdvancedSettings = &p.advanced
			out.st = st
			return out
		}
	}
	out.Considered = k
	out.NotAssigned = len(s.policies) - k
	return out
}

type evaluator struct {
	snap *Snapshot
	req  Request
	geo  Locator
	// The policies assigned to the user (bit i: policy i), and the one that
	// decided (-1: none).
	marks   []uint64
	inline  [16]uint64
	decided int
	// The request's address as integers.
	is4 bool
	ip4 uint32
	ip6 u128
	// The request's hour of the week in each time zone of the snapshot
	// (index + 1; 0: not computed yet).
	hours       []int16
	inlineHours [8]int16
	// The address's country, looked up once per decision.
	looked  bool
	country string
	why     string
	// all: give the reasons of passed checks too (explaining the policy
	// that applies); otherwise only failed checks get a reason.
	all bool
}

func (ev *evaluator) prepare() {
	s := ev.snap
	n := (len(s.policies) + 63) / 64
	if n <= len(ev.inline) {
		ev.marks = ev.inline[:n]
	} else {
		ev.marks = make([]uint64, n)
	}
	mark := func(list []int32) {
		for _, i := range list {
			ev.marks[i>>6] |= 1 << (i & 63)
		}
	}
	mark(s.forAnyone)
	mark(s.byUser[ev.req.UserID])
	for _, g := range ev.req.UserGroups {
		mark(s.byGroup[g])
	}
	if len(s.zones) <= len(ev.inlineHours) {
		ev.hours = ev.inlineHours[:len(s.zones)]
	} else {
		ev.hours = make([]int16, len(s.zones))
	}
	if ip := ev.req.IP; ip.IsValid() {
		if ip.Is4() {
			a := ip.As4()
			ev.is4, ev.ip4 = true, binary.BigEndian.Uint32(a[:])
		} else {
			ev.ip6 = u128From(ip)
		}
	}
}

// considered calls f for each policy considered, in priority order.
func (ev *evaluator) considered(f func(p *policy, matched bool)) {
	for w, word := range ev.marks {
		for word != 0 {
			i := w<<6 + bits.TrailingZeros64(word)
			word &= word - 1
			f(&ev.snap.policies[i], i == ev.decided)
			if i == ev.decided {
				return
			}
		}
	}
}

// hourOf returns the request's hour of the week (Sunday 00:00 is 0) in the
// config's time zone.
func (ev *evaluator) hourOf(cfg *config) int {
	h := ev.hours[cfg.zone]
	if h == 0 {
		lt := ev.req.Time.In(cfg.loc)
		h = int16(int(lt.Weekday())*24+lt.Hour()) + 1 //nolint:gosec // an hour of the week: at most 168
		ev.hours[cfg.zone] = h
	}
	return int(h) - 1
}

// match reports the policy's setting that the request meets when the
// policy applies, nil when it does not. It records nothing: explain says
// why, and must agree (TestMatch_AgreesWithExplain).
func (ev *evaluator) match(p *policy) *setting {
	st := ev.matchSetting(p)
	if st == nil || p.broken != "" {
		return nil
	}
	n := len(p.conds)
	if n == 0 {
		return st
	}
	if n > 64 {
		if _, ok := ev.explain(p, false, nil); !ok {
			return nil
		}
		return st
	}
	var holds uint64
	for i := range p.conds {
		if ev.holds(&p.conds[i]) {
			holds |= 1 << i
		}
	}
	if p.expr != nil {
		if !p.prog.evalBits(holds) {
			return nil
		}
	} else if holds != 1<<n-1 {
		return nil
	}
	return st
}

// matchSetting is setting without reasons.
func (ev *evaluator) matchSetting(p *policy) *setting {
	req := &ev.req
	for i := range p.settings {
		st := &p.settings[i]
		if st.endpoint != req.Endpoint {
			continue
		}
		if st.actions != nil {
			if !st.actions[req.Action] {
				continue
			}
		} else if req.Action != "" && req.Action != st.typ {
			continue
		}
		if st.endpoint != protection.EndpointComputerDevices || req.DeviceID != 0 && ev.protects(st) {
			return st
		}
	}
	return nil
}

// holds reports whether a condition holds.
func (ev *evaluator) holds(c *condition) bool {
	var in bool
	switch c.factor {
	case protection.FactorTypeIPAddress:
		in = ev.req.IP.IsValid() && ev.ipIn(c)
	case protection.FactorTypeGeolocation:
		country, _ := ev.lookup()
		for _, cfg := range c.configs {
			if cfg.broken == "" && (country == "" && cfg.unknownIn || country != "" && cfg.countries[country]) {
				in = true
				break
			}
		}
	case protection.FactorTypeTime:
		for _, cfg := range c.configs {
			if cfg.broken == "" && cfg.loc != nil && cfg.hours[ev.hourOf(cfg)] {
				in = true
				break
			}
		}
	default:
		return false
	}
	return in != c.notIn
}

// ipIn reports whether the request's (valid) address is in one of the
// condition's IP sources.
func (ev *evaluator) ipIn(c *condition) bool {
	for _, cfg := range c.configs {
		if cfg.broken == "" && ev.inConfig(cfg) {
			return true
		}
	}
	return false
}

// inConfig searches the config's sorted, disjoint ranges.
func (ev *evaluator) inConfig(c *config) bool {
	if ev.is4 {
		a, rs := ev.ip4, c.v4
		lo, hi := 0, len(rs)
		for lo < hi { // first range ending at or after a
			m := int(uint(lo+hi) >> 1)
			if rs[m].to < a {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo < len(rs) && rs[lo].from <= a
	}
	a, rs := ev.ip6, c.v6
	lo, hi := 0, len(rs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if rs[m].to.less(a) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(rs) && !a.less(rs[lo].from)
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

// explain finds the policy's reasons again, appended to out: every check
// for a policy that applies (all), for one that does not the checks that
// failed and the criteria's value; ok is whether it applies.
func (ev *evaluator) explain(p *policy, all bool, out []reason) ([]reason, bool) {
	ev.all = all
	defer func() { ev.all = false }()
	rs := reasons{out}
	_, ok := ev.check(p, &rs)
	return rs.list, ok
}

// appendReasons appends the policy's reasons as a JSON array, reusing
// scratch for the list.
func (ev *evaluator) appendReasons(b []byte, p *policy, matched bool, scratch []reason) ([]byte, []reason) {
	scratch, _ = ev.explain(p, matched, scratch[:0])
	b = append(b, '[')
	for j, r := range scratch {
		if j > 0 {
			b = append(b, ',')
		}
		b = r.appendJSON(b)
	}
	return append(b, ']'), scratch
}

type reasons struct{ list []reason }

// add appends r unless it is nil (a passed check's reason, not asked for).
func (rs *reasons) add(r func() string) {
	if r != nil {
		rs.list = append(rs.list, reason{f: r})
	}
}

// check runs the policy's checks, adding the reasons of those that failed,
// and of all when ev.all.
func (ev *evaluator) check(p *policy, rs *reasons) (*setting, bool) {
	req := &ev.req
	// Users (assigned already).
	if ev.all {
		switch {
		case p.isDefault:
			rs.add(text("user: the default policy applies to every user"))
		case p.users[req.UserID]:
			rs.add(func() string { return "user: " + itoa(req.UserID) + " is assigned directly" })
		default:
			group := int64(0)
			for _, g := range req.UserGroups {
				if p.groups[g] {
					group = g
					break
				}
			}
			rs.add(func() string { return "user: " + itoa(req.UserID) + " is assigned through group " + itoa(group) })
		}
	}
	// Endpoint, action, device.
	st, why := ev.setting(p)
	rs.add(why)
	if st == nil {
		return nil, false
	}
	// Criteria.
	if p.broken != "" {
		rs.add(text("criteria: " + p.broken))
		return nil, false
	}
	if len(p.conds) == 0 {
		if ev.all {
			rs.add(text("criteria: no conditions"))
		}
		return st, true
	}
	var small [24]bool
	holds := small[:0]
	for i := range p.conds {
		c := &p.conds[i]
		if c.factor == protection.FactorTypeIPAddress && ev.req.IP.IsValid() && len(c.configs) > 0 {
			// The frequent case, without a closure.
			in := ev.ipIn(c)
			ok := in != c.notIn
			holds = append(holds, ok)
			if !in && (ev.all || !ok) {
				rs.list = append(rs.list, reason{kind: reasonIPNone, holds: ok, c: c, ip: ev.req.IP})
				continue
			}
			if !ev.all && ok {
				continue
			}
		}
		if len(holds) == i+1 {
			holds = holds[:i]
		}
		ok, why := ev.condition(c)
		holds = append(holds, ok)
		rs.add(why)
	}
	var ok bool
	if p.expr != nil {
		ok = p.prog.eval(holds)
		rs.list = append(rs.list, reason{kind: reasonCriteria, holds: ok, p: p})
	} else {
		ok = true
		for _, h := range holds {
			ok = ok && h
		}
		rs.add(func() string { return "criteria: every condition (no expression) is " + strconv.FormatBool(ok) })
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
		if !ev.all && (st.endpoint != protection.EndpointComputerDevices || req.DeviceID != 0 && ev.protects(st)) {
			return st, nil
		}
		if st.endpoint != protection.EndpointComputerDevices {
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
	case protection.FactorTypeIPAddress:
		in, detail = ev.inIPSources(c)
	case protection.FactorTypeGeolocation:
		in, detail = ev.inLocations(c)
	case protection.FactorTypeTime:
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
		if cfg.broken == "" && ev.inConfig(cfg) {
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
		if cfg.broken != "" || cfg.loc == nil {
			continue
		}
		if cfg.hours[ev.hourOf(cfg)] {
			if ev.quiet(c, true) {
				return true, nil
			}
			hit := cfg
			return true, func() string {
				return t.UTC().Format(time.RFC3339) + " is " + t.In(hit.loc).Format(layout) + ", inside business hours " + named(hit)
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
			if cfg.loc == nil {
				outside = append(outside, fmt.Sprintf("%q (%d) is not a business hours config", cfg.name, cfg.id))
				continue
			}
			outside = append(outside, fmt.Sprintf("%s in %q (%d)", t.In(cfg.loc).Format(layout), cfg.name, cfg.id))
		}
		return fmt.Sprintf("%s is outside business hours: %s", t.UTC().Format(time.RFC3339), strings.Join(outside, "; "))
	}
}
