package decide

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"iam/models/protection"
)

type mapLocator map[netip.Addr]string

func (m mapLocator) Country(a netip.Addr) (string, string) {
	if c, ok := m[a]; ok {
		return c, ""
	}
	return "", "not in the map"
}

// TestMatch_AgreesWithExplain: the decision's fast path (match: integers,
// bitsets, no reasons) and the reasons' path (explain) agree on every
// policy for many random policies and requests, over every factor, both
// comparators, expressions, broken configs and expressions, endpoints,
// actions and devices; and the answer's considered policies are those
// Evaluated lists, the deciding one last.
func TestMatch_AgreesWithExplain(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11)) //nolint:gosec // a seeded, repeatable sequence of cases, not a secret
	addrs := []netip.Addr{
		netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.255.255.255"), netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.21"),
		netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"), netip.MustParseAddr("2001:db9::"),
		netip.MustParseAddr("81.2.3.4"), netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("::"), {},
	}
	geo := mapLocator{addrs[7]: "FR", addrs[8]: "US", addrs[4]: "DE"}
	configs := map[int64]*protection.ConditionConfig{
		1: {ID: 1, Family: protection.FamilyIPSources, DisplayName: "VPN", IsTrustedSource: true, IPAddresses: "10.0.0.0/8,2001:db8::/32"},
		2: {ID: 2, Family: protection.FamilyIPSources, DisplayName: "Office", IPAddressRanges: []protection.IPRange{{From: "192.0.2.10", To: "192.0.2.20"}, {From: "::", To: "::1"}}},
		3: {ID: 3, Family: protection.FamilyIPSources, DisplayName: "Zero", IPAddresses: "0.0.0.0/32,192.0.2.0/28"},
		4: {ID: 4, Family: protection.FamilyGeolocations, DisplayName: "Europe", Countries: []string{"FR", "DE"}},
		5: {ID: 5, Family: protection.FamilyGeolocations, DisplayName: "Unknown ok", Countries: []string{"us"}, IsUnknownIPLocationsIncluded: true},
		6: {ID: 6, Family: protection.FamilyBusinessHours, DisplayName: "NY", Timezone: "America/New_York", BusinessHoursBitmap: strings.Repeat("0011", 42)},
		7: {ID: 7, Family: protection.FamilyBusinessHours, DisplayName: "Tokyo", Timezone: "Asia/Tokyo", BusinessHoursBitmap: strings.Repeat("01", 84)},
		8: {ID: 8, Family: protection.FamilyBusinessHours, DisplayName: "Broken", Timezone: "Nowhere/City", BusinessHoursBitmap: strings.Repeat("1", 168)},
		9: {ID: 9, Family: protection.FamilyIPSources, DisplayName: "Bad", IPAddresses: "not an address"},
	}
	factors := map[int64]string{1: "ipaddress", 2: "ipaddress", 3: "ipaddress", 9: "ipaddress", 4: "geolocation", 5: "geolocation", 6: "time", 7: "time", 8: "time"}
	exprs := []string{"", "1", "1 and 2", "1 or 2", "(1 or 2) and 3", "1 or (2 and 3)", "1 and (", "4"}
	set := &protection.PolicySet{Configs: configs, TrustedSources: []int64{1}}
	for i := 0; i < 300; i++ {
		p := protection.Policy{ID: int64(i + 1), Name: fmt.Sprintf("P%d", i), IsEnabled: r.IntN(8) != 0, Priority: int64(i + 1),
			AccessType: []string{"allow", "deny"}[r.IntN(2)], UserIDs: []int64{int64(r.IntN(3))}, GroupIDs: []int64{int64(10 + r.IntN(3))}}
		switch r.IntN(3) {
		case 0:
			p.EndpointsSettings = []protection.EndpointSetting{{Endpoint: protection.EndpointNPS, Type: protection.EndpointTypeNPSVPN}}
		case 1:
			p.EndpointsSettings = []protection.EndpointSetting{{Endpoint: protection.EndpointComputerDevices, Type: protection.EndpointTypeComputerDevices,
				Actions: []string{"RDP", "SSH"}[:1+r.IntN(2)], DeviceAssignment: &protection.DeviceAssignment{AllDevicesGroupSelected: r.IntN(3) == 0,
					DeviceIDs: []protection.RefID{protection.RefID(50 + r.IntN(2))}, GroupIDs: []protection.RefID{protection.RefID(60 + r.IntN(2))}}}}
		default:
			p.EndpointsSettings = []protection.EndpointSetting{{Endpoint: protection.EndpointNPS, Type: protection.EndpointTypeNPSVPN},
				{Endpoint: protection.EndpointComputerDevices, Type: protection.EndpointTypeComputerDevices, Actions: []string{"SSH"},
					DeviceAssignment: &protection.DeviceAssignment{AllDevicesGroupSelected: true}}}
		}
		n := r.IntN(4)
		for k := 1; k <= n; k++ {
			id := int64(1 + r.IntN(9))
			c := protection.PolicyCondition{SequenceNumber: k, FactorType: factors[id], Comparator: []string{"in", "not_in"}[r.IntN(2)],
				FactorConfigs: []protection.RefID{protection.RefID(id)}, IncludeAllTrustedSources: r.IntN(4) == 0}
			if r.IntN(3) == 0 {
				c.FactorConfigs = append(c.FactorConfigs, protection.RefID(1+r.IntN(9)))
			}
			p.Conditions = append(p.Conditions, c)
		}
		p.CriteriaExpression = exprs[r.IntN(len(exprs))]
		set.Policies = append(set.Policies, p)
	}
	set.Policies = append(set.Policies, protection.Policy{ID: 999, Name: "Default", IsEnabled: true, IsDefault: true, AccessType: "allow", Priority: 999,
		EndpointsSettings: []protection.EndpointSetting{{Endpoint: protection.EndpointIIS, Type: protection.EndpointTypeIIS}}})
	snap := Compile(1, 1, set)
	start := time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)
	matched := 0
	for n := 0; n < 400; n++ {
		req := Request{UserID: int64(r.IntN(3)), UserGroups: []int64{int64(10 + r.IntN(3))}, Endpoint: []string{protection.EndpointNPS, protection.EndpointComputerDevices, protection.EndpointIIS}[r.IntN(3)],
			IP: addrs[r.IntN(len(addrs))], Time: start.Add(time.Duration(r.IntN(14*24*60)) * time.Minute)}
		if req.Endpoint == protection.EndpointComputerDevices {
			req.Action = []string{"RDP", "SSH", ""}[r.IntN(3)]
			if r.IntN(4) != 0 {
				req.DeviceID, req.DeviceGroups = int64(50+r.IntN(2)), []int64{int64(60 + r.IntN(2))}
			}
		}
		var loc Locator
		if r.IntN(2) == 0 {
			loc = geo
		}
		d := Decide(snap, req, loc)
		ev := d.ev
		for i := range snap.policies {
			p := &snap.policies[i]
			fast := ev.match(p) != nil
			_, slow := ev.explain(p, false, nil)
			_, slowAll := ev.explain(p, true, nil)
			if fast != slow || fast != slowAll {
				list, _ := ev.explain(p, true, nil)
				t.Fatalf("request %+v, policy %s: match %v, explain %v/%v; reasons %v", req, p.name, fast, slow, slowAll, list)
			}
			if fast {
				matched++
			}
		}
		evaluated := d.Evaluated()
		if len(evaluated) != d.Considered {
			t.Fatalf("%d evaluated, %d considered", len(evaluated), d.Considered)
		}
		for k, e := range evaluated {
			if e.Matched != (k == len(evaluated)-1 && d.Policy != nil) {
				t.Fatalf("evaluated %d of %d matched %v (policy %v)", k, len(evaluated), e.Matched, d.Policy)
			}
		}
	}
	if matched == 0 {
		t.Fatal("no policy ever matched: the test proves nothing")
	}
}

// TestDecide_WrongFamilyConfig: a condition naming a config of another
// family (which validation refuses, but a stored row may hold) does not
// hold through it, and says so; it neither panics nor matches.
func TestDecide_WrongFamilyConfig(t *testing.T) {
	set := &protection.PolicySet{Configs: map[int64]*protection.ConditionConfig{
		1: {ID: 1, Family: protection.FamilyIPSources, DisplayName: "VPN", IPAddresses: "10.0.0.0/8"},
		2: {ID: 2, Family: protection.FamilyBusinessHours, DisplayName: "Broken", Timezone: "Nowhere/City", BusinessHoursBitmap: strings.Repeat("1", 168)},
	}, Policies: []protection.Policy{
		{ID: 1, Name: "Hours", IsEnabled: true, Priority: 1, AccessType: "deny", UserIDs: []int64{5},
			EndpointsSettings: []protection.EndpointSetting{{Endpoint: protection.EndpointNPS, Type: protection.EndpointTypeNPSVPN}},
			Conditions:        []protection.PolicyCondition{{SequenceNumber: 1, FactorType: "time", Comparator: "in", FactorConfigs: []protection.RefID{2, 1}}}},
		{ID: 2, Name: "Default", IsEnabled: true, IsDefault: true, Priority: 2, AccessType: "allow",
			EndpointsSettings: []protection.EndpointSetting{{Endpoint: protection.EndpointNPS, Type: protection.EndpointTypeNPSVPN}}},
	}}
	d := Decide(Compile(1, 1, set), Request{UserID: 5, Endpoint: protection.EndpointNPS, IP: netip.MustParseAddr("10.0.0.1"), Time: time.Now()}, nil)
	if d.Policy == nil || d.Policy.Name != "Default" {
		t.Fatalf("decided by %+v, want the default policy", d.Policy)
	}
	why := strings.Join(d.Evaluated()[0].Reasons.Strings(), "\n")
	if !strings.Contains(why, `"VPN" (1) is not a business hours config`) || !strings.Contains(why, `"Broken" (2) is unreadable`) {
		t.Errorf("reasons %q", why)
	}
}
