// Package decide is the conditional access decision engine: pure functions
// over a compiled, immutable snapshot of one organization's enabled
// policies and the condition configs they name. It reads no database; the
// caller loads the policy set (models.PolicyStore.LoadEnabledPolicies),
// compiles it once (Compile) and decides many requests against it (Decide),
// passing per request what depends on the user and device (their groups).
// Cache keeps one snapshot per organization, rebuilt when the
// organization's protection version moves. docs/protection.md has the rules.
package decide

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"iam/models"
	"iam/models/criteria"
	"iam/models/protection"
)

// Snapshot is one organization's enabled policies, compiled for deciding.
// It is immutable once made: concurrent decisions share it.
type Snapshot struct {
	OrgID    int64
	Version  int64
	policies []policy
	// The policies assigned to each user and group, and the default ones,
	// as ascending indexes into policies: a decision visits only those.
	byUser    map[int64][]int32
	byGroup   map[int64][]int32
	forAnyone []int32
	// zones are the time zones of the business hours configs (config.zone
	// indexes them): a decision finds its hour once per zone.
	zones []*time.Location
}

// Policies reports how many policies the snapshot holds.
func (s *Snapshot) Policies() int { return len(s.policies) }

type policy struct {
	id        int64
	idText    string
	name      string
	ref       PolicyRef
	isDefault bool
	priority  int64
	access    string
	users     map[int64]bool
	groups    map[int64]bool
	settings  []setting
	expr      criteria.Expr // nil: every condition must hold (none: always)
	broken    string        // why the expression cannot be read: never matches
	exprText  string
	// prog is the expression over the indexes of conds (not their
	// sequence numbers), evaluated without closures.
	prog     node
	conds    []condition // by sequence number ascending
	advanced protection.PolicyAdvancedSettings
	// Written once for the answers: the start of the policy's evaluated
	// entry up to "matched":, the expression's text and the advanced
	// settings in JSON.
	headJSON []byte
	exprJSON string
	advJSON  []byte
}

type setting struct {
	src          *protection.EndpointSetting
	endpoint     string
	typ          string
	actions      map[string]bool // nil: the type takes no action
	allDevices   bool
	devices      map[int64]bool
	deviceGroups map[int64]bool
	// The setting's parts of an answer in JSON, written once.
	primaryJSON, secondaryJSON, advJSON []byte
}

type condition struct {
	seq     int
	factor  string
	notIn   bool
	configs []*config
	// head ("condition 1 (ipaddress in): ") and names (the configs named)
	// are made once for the reasons.
	head  string
	names string
	// The same, escaped for a JSON string.
	headJSON, namesJSON string
}

type config struct {
	id   int64
	name string
	// ipsources: merged sorted ranges per family, as integers.
	v4 []v4Range
	v6 []v6Range
	// geolocations.
	countries map[string]bool
	unknownIn bool
	// businesshours: hours of the week from Sunday 00:00, in loc (the
	// snapshot's zone number zone).
	loc   *time.Location
	zone  int
	hours [protection.BusinessHoursBits]bool
	// broken says why a config cannot be read (it then never matches).
	broken string
}

type ipRange struct{ from, to netip.Addr }

type v4Range struct{ from, to uint32 }

type v6Range struct{ from, to u128 }

// u128 is an IPv6 address as an integer.
type u128 struct{ hi, lo uint64 }

func u128From(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

// Compile builds the snapshot of a policy set, whose policies are in
// priority order (the default policy last); disabled ones are left out. A policy whose criteria
// expression does not parse, or a config whose stored form does not read,
// is kept but never matches (its reasons say why): one bad row must not
// stop an organization's decisions.
func Compile(orgID, version int64, set *protection.PolicySet) *Snapshot {
	s := &Snapshot{OrgID: orgID, Version: version}
	configs := map[int64]*config{}
	zones := map[string]int{}
	cfg := func(id int64) *config {
		if c, ok := configs[id]; ok {
			return c
		}
		c := compileConfig(id, set.Configs[id])
		if c.loc != nil {
			z, ok := zones[c.loc.String()]
			if !ok {
				z = len(s.zones)
				zones[c.loc.String()] = z
				s.zones = append(s.zones, c.loc)
			}
			c.zone = z
		}
		configs[id] = c
		return c
	}
	var trusted []*config
	for _, id := range set.TrustedSources {
		trusted = append(trusted, cfg(id))
	}
	for i := range set.Policies {
		p := &set.Policies[i]
		if !p.IsEnabled {
			continue // a disabled policy decides nothing
		}
		cp := policy{id: p.ID, idText: models.FormatID(p.ID), name: p.Name, isDefault: p.IsDefault, priority: p.Priority, access: p.AccessType,
			users: setOf(p.UserIDs), groups: setOf(p.GroupIDs), advanced: p.AdvancedSettings}
		cp.ref = PolicyRef{ID: cp.idText, Name: cp.name}
		cp.headJSON = append(appendString([]byte(`{"policy_id":`), cp.idText), `,"name":`...)
		cp.headJSON = append(appendString(cp.headJSON, cp.name), `,"priority":`...)
		cp.headJSON = append(strconv.AppendInt(cp.headJSON, cp.priority, 10), `,"matched":`...)
		cp.advJSON = marshalOrNil(&cp.advanced)
		for j := range p.EndpointsSettings {
			st := &p.EndpointsSettings[j]
			cs := setting{src: st, endpoint: st.Endpoint, typ: st.Type, primaryJSON: marshalOrNil(&st.PrimaryAuthentication),
				secondaryJSON: marshalOrNil(&st.SecondaryAuthentication), advJSON: marshalOrNil(&st.AdvancedSettings)}
			if _, ok := protection.EndpointActions[st.Type]; ok {
				cs.actions = map[string]bool{}
				for _, a := range st.Actions {
					cs.actions[a] = true
				}
			}
			if da := st.DeviceAssignment; da != nil {
				cs.allDevices = da.AllDevicesGroupSelected
				cs.devices = setOf(refs(da.DeviceIDs))
				cs.deviceGroups = setOf(refs(da.GroupIDs))
			}
			cp.settings = append(cp.settings, cs)
		}
		for _, c := range p.Conditions {
			cc := condition{seq: c.SequenceNumber, factor: c.FactorType, notIn: c.Comparator == protection.ComparatorNotIn}
			for _, id := range c.FactorConfigs {
				cc.configs = append(cc.configs, cfg(int64(id)))
			}
			if c.IncludeAllTrustedSources && c.FactorType == protection.FactorTypeIPAddress {
				for _, t := range trusted {
					if !slices.Contains(cc.configs, t) {
						cc.configs = append(cc.configs, t)
					}
				}
			}
			cmp := protection.ComparatorIn
			if cc.notIn {
				cmp = protection.ComparatorNotIn
			}
			cc.head = "condition " + strconv.Itoa(cc.seq) + " (" + cc.factor + " " + cmp + "): "
			cc.names = names(cc.configs)
			cc.headJSON, cc.namesJSON = escaped(cc.head), escaped(cc.names)
			cp.conds = append(cp.conds, cc)
		}
		sort.Slice(cp.conds, func(a, b int) bool { return cp.conds[a].seq < cp.conds[b].seq })
		if strings.TrimSpace(p.CriteriaExpression) != "" {
			expr, err := criteria.Parse(p.CriteriaExpression)
			if err != nil {
				cp.broken = fmt.Sprintf("criteria_expression %q does not parse: %v", p.CriteriaExpression, err)
			} else {
				cp.expr = expr
				cp.exprText = expr.String()
				cp.exprJSON = escaped(cp.exprText)
				cp.prog = compileExpr(expr, cp.conds)
			}
		}
		s.policies = append(s.policies, cp)
	}
	s.byUser, s.byGroup = map[int64][]int32{}, map[int64][]int32{}
	for i := range s.policies {
		p := &s.policies[i]
		if p.isDefault {
			s.forAnyone = append(s.forAnyone, int32(i))
			continue
		}
		for u := range p.users {
			s.byUser[u] = append(s.byUser[u], int32(i))
		}
		for g := range p.groups {
			s.byGroup[g] = append(s.byGroup[g], int32(i))
		}
	}
	return s
}

func refs(ids []protection.RefID) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

func setOf(ids []int64) map[int64]bool {
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// node is a compiled criteria expression: a leaf names a condition by its
// index in policy.conds (-1: no such condition, false).
type node struct {
	and, or bool
	kids    []node
	idx     int
}

func compileExpr(e criteria.Expr, conds []condition) node {
	switch e := e.(type) {
	case criteria.Ref:
		for i := range conds {
			if conds[i].seq == int(e) {
				return node{idx: i}
			}
		}
		return node{idx: -1}
	case *criteria.And:
		n := node{and: true}
		for _, t := range e.Terms {
			n.kids = append(n.kids, compileExpr(t, conds))
		}
		return n
	case *criteria.Or:
		n := node{or: true}
		for _, t := range e.Terms {
			n.kids = append(n.kids, compileExpr(t, conds))
		}
		return n
	}
	return node{idx: -1}
}

// eval evaluates the node over the conditions' values.
func (n *node) eval(holds []bool) bool {
	switch {
	case n.and:
		for i := range n.kids {
			if !n.kids[i].eval(holds) {
				return false
			}
		}
		return true
	case n.or:
		for i := range n.kids {
			if n.kids[i].eval(holds) {
				return true
			}
		}
		return false
	}
	return n.idx >= 0 && holds[n.idx]
}

func compileConfig(id int64, c *protection.ConditionConfig) *config {
	if c == nil {
		return &config{id: id, name: models.FormatID(id), broken: "the config no longer exists"}
	}
	out := &config{id: id, name: c.DisplayName}
	switch c.Family {
	case protection.FamilyIPSources:
		set, err := c.IPSet()
		if err != nil {
			out.broken = err.Error()
			return out
		}
		var rs []ipRange
		for _, p := range set.Prefixes {
			rs = append(rs, ipRange{p.Masked().Addr(), lastAddr(p)})
		}
		for _, r := range set.Ranges {
			rs = append(rs, ipRange{r[0], r[1]})
		}
		var v4, v6 []ipRange
		for _, r := range rs {
			if r.from.Is4() {
				v4 = append(v4, r)
			} else {
				v6 = append(v6, r)
			}
		}
		for _, r := range merge(v4) {
			from, to := r.from.As4(), r.to.As4()
			out.v4 = append(out.v4, v4Range{binary.BigEndian.Uint32(from[:]), binary.BigEndian.Uint32(to[:])})
		}
		for _, r := range merge(v6) {
			out.v6 = append(out.v6, v6Range{u128From(r.from), u128From(r.to)})
		}
	case protection.FamilyGeolocations:
		out.countries = map[string]bool{}
		for _, cc := range c.Countries {
			out.countries[strings.ToUpper(cc)] = true
		}
		out.unknownIn = c.IsUnknownIPLocationsIncluded
	case protection.FamilyBusinessHours:
		loc, err := time.LoadLocation(c.Timezone)
		if err != nil {
			out.broken = fmt.Sprintf("time zone %q: %v", c.Timezone, err)
			return out
		}
		if len(c.BusinessHoursBitmap) != protection.BusinessHoursBits {
			out.broken = fmt.Sprintf("bitmap of %d characters, not %d", len(c.BusinessHoursBitmap), protection.BusinessHoursBits)
			return out
		}
		out.loc = loc
		for i := 0; i < protection.BusinessHoursBits; i++ {
			out.hours[i] = c.BusinessHoursBitmap[i] == '1'
		}
	default:
		out.broken = fmt.Sprintf("unknown family %q", c.Family)
	}
	return out
}

// lastAddr is the last address of a prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().As16()
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	for i := bits; i < 128; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		return a.Unmap()
	}
	return a
}

// merge sorts ranges and joins those that overlap or touch.
func merge(rs []ipRange) []ipRange {
	if len(rs) == 0 {
		return nil
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].from.Less(rs[j].from) })
	out := []ipRange{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		next := last.to.Next()
		if !r.from.Less(next) && r.from != next && next.IsValid() {
			out = append(out, r)
			continue
		}
		if last.to.Less(r.to) {
			last.to = r.to
		}
	}
	return out
}

// marshalOrNil is v in JSON, nil when it does not marshal (the answer
// then marshals it itself and reports the error).
func marshalOrNil(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// escaped is s as the inside of a JSON string.
func escaped(s string) string {
	b := appendString(nil, s)
	return string(b[1 : len(b)-1])
}

// evalBits evaluates the node over the conditions' values, bit i the
// value of condition i (at most 64 conditions).
func (n *node) evalBits(holds uint64) bool {
	switch {
	case n.and:
		for i := range n.kids {
			if !n.kids[i].evalBits(holds) {
				return false
			}
		}
		return true
	case n.or:
		for i := range n.kids {
			if n.kids[i].evalBits(holds) {
				return true
			}
		}
		return false
	}
	return n.idx >= 0 && holds&(1<<n.idx) != 0
}
