package protection_test

import (
	"iam/models/protection"
	"net/netip"
	"strings"
	"testing"
)

// FuzzValidateConditionConfig feeds arbitrary text to every field: no
// panic, and a config that passes is in canonical form (checking it again
// changes nothing) and its IP set parses and holds its own addresses.
func FuzzValidateConditionConfig(f *testing.F) {
	f.Add("10.0.0.0/8, 192.0.2.1", "198.51.100.1", "198.51.100.9", "fr,DE", "Europe/Paris", strings.Repeat("01", 84))
	f.Add("::ffff:1.2.3.4,2001:db8::/33", "::1", "::2", "XX", "Local", "1111000011110000")
	f.Fuzz(func(t *testing.T, addrs, from, to, countries, zone, bitmap string) {
		for _, fam := range protection.ConfigFamilies {
			c := protection.ConditionConfig{Family: fam, DisplayName: "x", IPAddresses: addrs, IPAddressRanges: []protection.IPRange{{From: from, To: to}},
				Countries: strings.Split(countries, ","), Timezone: zone, BusinessHoursBitmap: bitmap}
			if err := protection.ValidateConditionConfig(&c); err != nil {
				continue
			}
			again := c
			again.Countries = append([]string(nil), c.Countries...)
			again.IPAddressRanges = append([]protection.IPRange(nil), c.IPAddressRanges...)
			if err := protection.ValidateConditionConfig(&again); err != nil || again.IPAddresses != c.IPAddresses || again.Timezone != c.Timezone ||
				strings.Join(again.Countries, ",") != strings.Join(c.Countries, ",") {
				t.Fatalf("not canonical: %+v then %+v (%v)", c, again, err)
			}
			if fam == protection.FamilyBusinessHours {
				if _, err := c.InBusinessHours(c.UpdatedAt); err != nil {
					t.Fatalf("InBusinessHours of a valid config: %v", err)
				}
			}
			if fam != protection.FamilyIPSources {
				continue
			}
			set, err := c.IPSet()
			if err != nil {
				t.Fatalf("IPSet of a valid config: %v", err)
			}
			for _, r := range c.IPAddressRanges {
				if !set.Contains(netip.MustParseAddr(r.From)) || !set.Contains(netip.MustParseAddr(r.To)) {
					t.Fatalf("range %v not in its own set", r)
				}
			}
		}
	})
}
