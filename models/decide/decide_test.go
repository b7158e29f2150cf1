package decide_test

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"iam/models/decide"
	"iam/models/protection"
)

// geoDB writes a MaxMind database mapping networks to countries and opens it.
func geoDB(t testing.TB, nets map[string]string) *decide.GeoIP {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoLite2-Country", RecordSize: 24, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, cc := range nets {
		_, n, parseErr := net.ParseCIDR(cidr)
		if parseErr != nil {
			t.Fatal(parseErr)
		}
		if err = tree.Insert(n, mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(cc)}}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "geo.mmdb")
	f, err := os.Create(path) //nolint:gosec // a path of the test's own temporary directory
	if err != nil {
		t.Fatal(err)
	}
	if _, err = tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err = f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := decide.OpenGeoIP(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return g
}

// hours is a bitmap with the given hours (day*24+hour) set.
func hours(set ...int) string {
	b := []byte(strings.Repeat("0", protection.BusinessHoursBits))
	for _, h := range set {
		b[h] = '1'
	}
	return string(b)
}

const (
	sunday = 0
	monday = 1
)

func nps() []protection.EndpointSetting {
	return []protection.EndpointSetting{{Endpoint: protection.EndpointNPS, Type: protection.EndpointTypeNPSVPN,
		SecondaryAuthentication: protection.SecondaryAuthentication{IsMFAEnabled: true, NoOfRequiredFactors: 1}}}
}

func cond(seq int, factor, cmp string, trusted bool, ids ...int64) protection.PolicyCondition {
	c := protection.PolicyCondition{SequenceNumber: seq, FactorType: factor, Comparator: cmp, IncludeAllTrustedSources: trusted}
	for _, id := range ids {
		c.FactorConfigs = append(c.FactorConfigs, protection.RefID(id))
	}
	return c
}

// TestDecide_Table: the decision table of the conditional access engine.
func TestDecide_Table(t *testing.T) {
	const (
		user      = 100
		otherUser = 101
		group     = 200 // a (dynamic) group the user belongs to
		device    = 300
		devGroup  = 400
		// configs
		trusted  = 1
		office   = 2
		europe   = 3
		unknownC = 4
		nyHours  = 5
		tokyoMon = 6
	)
	configs := map[int64]*protection.ConditionConfig{
		trusted:  {ID: trusted, Family: protection.FamilyIPSources, DisplayName: "VPN", IsTrustedSource: true, IPAddresses: "10.0.0.0/8,2001:db8::/32"},
		office:   {ID: office, Family: protection.FamilyIPSources, DisplayName: "Office", IPAddressRanges: []protection.IPRange{{From: "192.0.2.10", To: "192.0.2.20"}}},
		europe:   {ID: europe, Family: protection.FamilyGeolocations, DisplayName: "Europe", Countries: []string{"FR", "DE"}},
		unknownC: {ID: unknownC, Family: protection.FamilyGeolocations, DisplayName: "Unknown ok", Countries: []string{"FR"}, IsUnknownIPLocationsIncluded: true},
		// 09:00-10:00 New York time on Sundays.
		nyHours: {ID: nyHours, Family: protection.FamilyBusinessHours, DisplayName: "NY Sunday 9", Timezone: "America/New_York", BusinessHoursBitmap: hours(sunday*24 + 9)},
		// 00:00-01:00 Tokyo time on Mondays.
		tokyoMon: {ID: tokyoMon, Family: protection.FamilyBusinessHours, DisplayName: "Tokyo Monday 0", Timezone: "Asia/Tokyo", BusinessHoursBitmap: hours(monday*24 + 0)},
	}
	def := protection.Policy{ID: 999, Name: "Default", IsEnabled: true, IsDefault: true, AccessType: protection.AccessAllow, Priority: 99,
		EndpointsSettings: append(nps(), protection.EndpointSetting{Endpoint: protection.EndpointComputerDevices, Type: protection.EndpointTypeComputerDevices,
			Actions: []string{"RDP"}, DeviceAssignment: &protection.DeviceAssignment{AllDevicesGroupSelected: true}})}
	base := func(id int64, name string, access string, conds ...protection.PolicyCondition) protection.Policy {
		p := protection.Policy{ID: id, Name: name, IsEnabled: true, AccessType: access, Priority: id, UserIDs: []int64{user}, EndpointsSettings: nps(),
			Conditions: conds}
		return p
	}
	single := func(p protection.Policy, expr string) *protection.PolicySet {
		p.CriteriaExpression = expr
		return &protection.PolicySet{Policies: []protection.Policy{p, def}, Configs: configs, TrustedSources: []int64{trusted}}
	}
	geo := geoDB(t, map[string]string{"81.0.0.0/8": "FR", "2a01::/16": "FR", "8.8.8.0/24": "US"})
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	noon := at("2026-06-10T12:00:00Z")

	// The deny policy of each case decides when its conditions hold; else the default allows.
	denyIf := func(conds ...protection.PolicyCondition) protection.Policy {
		return base(1, "Guard", protection.AccessDeny, conds...)
	}
	cases := []struct {
		name    string
		set     *protection.PolicySet
		req     decide.Request
		geo     decide.Locator
		want    string // allow or deny
		policy  string // deciding policy's name
		inWhy   string // a reason of the first policy contains this
		matched bool   // whether the first policy matched
		// notAssigned: the first policy is not the user's, so only counted.
		notAssigned bool
	}{
		{"IPv4 inside trusted sources (in)", single(denyIf(cond(1, "ipaddress", "in", true)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("10.1.2.3"), Time: noon}, nil, "deny", "Guard", `address 10.1.2.3 is in IP source "VPN"`, true, false},
		{"IPv4 outside trusted sources", single(denyIf(cond(1, "ipaddress", "in", true)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("11.1.2.3"), Time: noon}, nil, "allow", "Default", "is in none of the IP sources", false, false},
		{"IPv6 inside trusted, not_in", single(denyIf(cond(1, "ipaddress", "not_in", true)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("2001:db8::1"), Time: noon}, nil, "allow", "Default", "does not hold", false, false},
		{"IPv6 outside trusted, not_in", single(denyIf(cond(1, "ipaddress", "not_in", true)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("2001:db9::1"), Time: noon}, nil, "deny", "Guard", "so it holds", true, false},
		{"IPv4-mapped IPv6 counts as IPv4", single(denyIf(cond(1, "ipaddress", "in", false, office)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("::ffff:192.0.2.15"), Time: noon}, nil, "deny", "Guard", `"Office"`, true, false},
		{"range end inclusive", single(denyIf(cond(1, "ipaddress", "in", false, office)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("192.0.2.20"), Time: noon}, nil, "deny", "Guard", "", true, false},
		{"range just past", single(denyIf(cond(1, "ipaddress", "in", false, office)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("192.0.2.21"), Time: noon}, nil, "allow", "Default", "", false, false},
		{"country in the list", single(denyIf(cond(1, "geolocation", "in", false, europe)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("81.2.3.4"), Time: noon}, geo, "deny", "Guard", "is in FR", true, false},
		{"IPv6 country in the list", single(denyIf(cond(1, "geolocation", "in", false, europe)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("2a01:e0a::1"), Time: noon}, geo, "deny", "Guard", "is in FR", true, false},
		{"country not in the list", single(denyIf(cond(1, "geolocation", "in", false, europe)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("8.8.8.8"), Time: noon}, geo, "allow", "Default", "is in US", false, false},
		{"unknown location not included", single(denyIf(cond(1, "geolocation", "in", false, europe)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("9.9.9.9"), Time: noon}, geo, "allow", "Default", "unknown location (not in the GeoIP database)", false, false},
		{"unknown location included", single(denyIf(cond(1, "geolocation", "in", false, unknownC)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("9.9.9.9"), Time: noon}, geo, "deny", "Guard", "which geolocation \"Unknown ok\"", true, false},
		{"no database: every address unknown", single(denyIf(cond(1, "geolocation", "in", false, unknownC)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("81.2.3.4"), Time: noon}, nil, "deny", "Guard", "no GeoIP database is configured", true, false},
		{"no database, unknown not included", single(denyIf(cond(1, "geolocation", "in", false, europe)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("81.2.3.4"), Time: noon}, nil, "allow", "Default", "no GeoIP database is configured", false, false},
		// 2026-03-08 is the Sunday New York moves to EDT (UTC-4) at 02:00.
		{"business hours after the DST change", single(denyIf(cond(1, "time", "in", false, nyHours)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("10.0.0.1"), Time: at("2026-03-08T13:30:00Z")}, nil, "deny", "Guard", "Sun 09:30 EDT", true, false},
		{"same UTC hour a week before the change is 08:30 EST", single(denyIf(cond(1, "time", "in", false, nyHours)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("10.0.0.1"), Time: at("2026-03-01T13:30:00Z")}, nil, "allow", "Default", "Sun 08:30 EST", false, false},
		{"business hours before the change", single(denyIf(cond(1, "time", "in", false, nyHours)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("10.0.0.1"), Time: at("2026-03-01T14:30:00Z")}, nil, "deny", "Guard", "Sun 09:30 EST", true, false},
		{"across midnight: Sunday UTC is Monday in Tokyo", single(denyIf(cond(1, "time", "in", false, tokyoMon)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("10.0.0.1"), Time: at("2026-06-14T15:30:00Z")}, nil, "deny", "Guard", "Mon 00:30 JST", true, false},
		{"an hour before Tokyo midnight", single(denyIf(cond(1, "time", "in", false, tokyoMon)), "1"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("10.0.0.1"), Time: at("2026-06-14T14:30:00Z")}, nil, "allow", "Default", "Sun 23:30 JST", false, false},
		{"expression: 1 or (2 and 3)", single(denyIf(cond(1, "ipaddress", "in", false, office), cond(2, "geolocation", "in", false, europe), cond(3, "time", "not_in", false, nyHours)), "1 or (2 and 3)"),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("81.2.3.4"), Time: noon}, geo, "deny", "Guard", "criteria: 1 or (2 and 3) is true", true, false},
		{"user not assigned falls to the default", single(denyIf(), ""),
			decide.Request{UserID: otherUser, Endpoint: "NPS", IP: netip.MustParseAddr("10.0.0.1"), Time: noon}, nil, "allow", "Default", "", false, true},
		{"user through a group", func() *protection.PolicySet {
			p := denyIf()
			p.UserIDs, p.GroupIDs = nil, []int64{group}
			return single(p, "")
		}(), decide.Request{UserID: otherUser, UserGroups: []int64{7, group}, Endpoint: "NPS", IP: netip.MustParseAddr("10.0.0.1"), Time: noon}, nil, "deny", "Guard", "through group 200", true, false},
		{"endpoint not covered", single(denyIf(), ""),
			decide.Request{UserID: user, Endpoint: "IIS", IP: netip.MustParseAddr("10.0.0.1"), Time: noon}, nil, "deny", "", "has no IIS setting", false, false},
		{"device through a device group", func() *protection.PolicySet {
			p := denyIf()
			p.EndpointsSettings = []protection.EndpointSetting{{Endpoint: protection.EndpointComputerDevices, Type: protection.EndpointTypeComputerDevices,
				Actions: []string{"RDP", "SSH"}, DeviceAssignment: &protection.DeviceAssignment{GroupIDs: []protection.RefID{devGroup}}}}
			return single(p, "")
		}(), decide.Request{UserID: user, DeviceID: device, DeviceGroups: []int64{devGroup}, Endpoint: "ComputerDevices", Action: "SSH", IP: netip.MustParseAddr("10.0.0.1"), Time: noon}, nil, "deny", "Guard", "through device group 400", true, false},
		{"device outside the device group", func() *protection.PolicySet {
			p := denyIf()
			p.EndpointsSettings = []protection.EndpointSetting{{Endpoint: protection.EndpointComputerDevices, Type: protection.EndpointTypeComputerDevices,
				Actions: []string{"RDP"}, DeviceAssignment: &protection.DeviceAssignment{GroupIDs: []protection.RefID{devGroup}}}}
			return single(p, "")
		}(), decide.Request{UserID: user, DeviceID: device, Endpoint: "ComputerDevices", Action: "RDP", IP: netip.MustParseAddr("10.0.0.1"), Time: noon}, nil, "allow", "Default", "does not protect device 300", false, false},
		{"action not covered", func() *protection.PolicySet {
			p := denyIf()
			p.EndpointsSettings = []protection.EndpointSetting{{Endpoint: protection.EndpointComputerDevices, Type: protection.EndpointTypeComputerDevices,
				Actions: []string{"SSH"}, DeviceAssignment: &protection.DeviceAssignment{AllDevicesGroupSelected: true}}}
			return single(p, "")
		}(), decide.Request{UserID: user, DeviceID: device, Endpoint: "ComputerDevices", Action: "RDP", IP: netip.MustParseAddr("10.0.0.1"), Time: noon}, nil, "allow", "Default", `does not cover action "RDP"`, false, false},
		{"deny above allow by priority", &protection.PolicySet{Policies: []protection.Policy{base(1, "Deny first", protection.AccessDeny), base(2, "Allow second", protection.AccessAllow), def}, Configs: configs},
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("10.0.0.1"), Time: noon}, nil, "deny", "Deny first", "no conditions", true, false},
		{"disabled policy skipped", func() *protection.PolicySet {
			off := base(1, "Off", protection.AccessDeny)
			off.IsEnabled = false
			return &protection.PolicySet{Policies: []protection.Policy{off, base(2, "Allow", protection.AccessAllow), def}, Configs: configs}
		}(), decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("10.0.0.1"), Time: noon}, nil, "allow", "Allow", "no conditions", true, false},
		{"broken expression never matches", single(denyIf(cond(1, "ipaddress", "in", true)), "1 and ("),
			decide.Request{UserID: user, Endpoint: "NPS", IP: netip.MustParseAddr("10.0.0.1"), Time: noon}, nil, "allow", "Default", "does not parse", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			snap := decide.Compile(1, 1, c.set)
			d := decide.Decide(snap, c.req, c.geo)
			evaluated := d.Evaluated()
			name := ""
			if d.Policy != nil {
				name = d.Policy.Name
			}
			if d.Decision != c.want || name != c.policy {
				t.Errorf("decision %s by %q, want %s by %q; evaluated %+v", d.Decision, name, c.want, c.policy, evaluated)
			}
			if len(evaluated) == 0 {
				t.Fatal("nothing evaluated")
			}
			first := evaluated[0]
			if c.notAssigned {
				if d.NotAssigned != 1 || first.Name != "Default" {
					t.Errorf("the unassigned policy should be counted, not considered: %d %+v", d.NotAssigned, evaluated)
				}
			} else if first.Matched != c.matched || !strings.Contains(strings.Join(first.Reasons.Strings(), "\n"), c.inWhy) {
				t.Errorf("first policy matched %v, want %v; reasons %q want %q", first.Matched, c.matched, first.Reasons.Strings(), c.inWhy)
			}
			// The default policy is considered last and only when nothing else applied.
			last := evaluated[len(evaluated)-1]
			if c.policy == "Default" && (last.Name != "Default" || !last.Matched) {
				t.Errorf("the default policy should decide last: %+v", evaluated)
			}
			if d.Policy != nil && (d.SecondaryAuthentication == nil || d.AdvancedSettings == nil) {
				t.Errorf("settings missing: %+v", d)
			}
		})
	}
}
