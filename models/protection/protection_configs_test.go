package protection_test

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/listing"
	"iam/models/modeltest"
	"iam/models/protection"
	"iam/models/store"
)

// week returns a bitmap with the hours [from, to) of each day in days set.
func week(days []time.Weekday, from, to int) string {
	b := []byte(strings.Repeat("0", protection.BusinessHoursBits))
	for _, d := range days {
		for h := from; h < to; h++ {
			b[int(d)*24+h] = '1'
		}
	}
	return string(b)
}

var workdays = []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}

func causesOf(err error) map[string]string {
	var e *models.Error
	out := map[string]string{}
	if errors.As(err, &e) {
		for _, c := range e.Causes {
			if _, dup := out[c.Title]; dup {
				out[c.Title+"#dup"] = c.Detail
			}
			out[c.Title] = c.Detail
		}
	}
	return out
}

func TestValidateConditionConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  protection.ConditionConfig
		want map[string]string // field → part of the detail; nil: valid
	}{
		{"business hours", protection.ConditionConfig{Family: protection.FamilyBusinessHours, DisplayName: "Office", BusinessHoursBitmap: week(workdays, 9, 17), Timezone: "Europe/Paris"}, nil},
		{"spec's 16 characters", protection.ConditionConfig{Family: protection.FamilyBusinessHours, DisplayName: "Office", BusinessHoursBitmap: "1111000011110000", Timezone: "UTC"},
			map[string]string{"business_hours_bitmap": "must be 168 characters of 0 and 1, one per hour of the week from Sunday 00:00 (24 × 7); got 16"}},
		{"not 0 and 1", protection.ConditionConfig{Family: protection.FamilyBusinessHours, DisplayName: "Office", BusinessHoursBitmap: strings.Repeat("0", 100) + "2" + strings.Repeat("0", 67), Timezone: "UTC"},
			map[string]string{"business_hours_bitmap": "character 101"}},
		{"bad zone and name", protection.ConditionConfig{Family: protection.FamilyBusinessHours, DisplayName: " ", BusinessHoursBitmap: week(workdays, 9, 17), Timezone: "Mars/Olympus"},
			map[string]string{"timezone": "not an IANA", "display_name": "required"}},
		{"Local is not a zone", protection.ConditionConfig{Family: protection.FamilyBusinessHours, DisplayName: "x", BusinessHoursBitmap: week(workdays, 9, 17), Timezone: "Local"},
			map[string]string{"timezone": "not an IANA"}},
		{"countries", protection.ConditionConfig{Family: protection.FamilyGeolocations, DisplayName: "EU", Countries: []string{"fr", "DE", "FR"}}, nil},
		{"unknown countries", protection.ConditionConfig{Family: protection.FamilyGeolocations, DisplayName: "EU", Countries: []string{"FR", "XX", "EU", "USA"}},
			map[string]string{"countries": `"XX", "EU", "USA" are not ISO 3166-1 alpha-2`}},
		{"no countries", protection.ConditionConfig{Family: protection.FamilyGeolocations, DisplayName: "none"}, map[string]string{"countries": "at least one"}},
		{"unknown locations only", protection.ConditionConfig{Family: protection.FamilyGeolocations, DisplayName: "unknown", IsUnknownIPLocationsIncluded: true}, nil},
		{"addresses", protection.ConditionConfig{Family: protection.FamilyIPSources, DisplayName: "Office", IPAddresses: "10.1.2.3/8, 192.0.2.1,2001:db8::/32,::ffff:198.51.100.7",
			IPAddressRanges: []protection.IPRange{{From: "192.0.2.10", To: "192.0.2.20"}, {From: "2001:db8::1", To: "2001:db8::ff"}}}, nil},
		{"bad address", protection.ConditionConfig{Family: protection.FamilyIPSources, DisplayName: "Office", IPAddresses: "10.0.0.1, 300.1.1.1, fe80::1%eth0, 10.0.0.0/33"},
			map[string]string{"ip_addresses": `"300.1.1.1", "fe80::1%eth0", "10.0.0.0/33" are not`}},
		{"range backwards", protection.ConditionConfig{Family: protection.FamilyIPSources, DisplayName: "Office", IPAddressRanges: []protection.IPRange{{From: "10.0.0.9", To: "10.0.0.1"}}},
			map[string]string{"ip_address_ranges": "entry 1: from 10.0.0.9 is after to 10.0.0.1"}},
		{"range of two families", protection.ConditionConfig{Family: protection.FamilyIPSources, DisplayName: "Office", IPAddresses: "bad",
			IPAddressRanges: []protection.IPRange{{From: "10.0.0.1", To: "10.0.0.2"}, {From: "10.0.0.1", To: "::1"}, {From: "x", To: "y"}}},
			map[string]string{"ip_address_ranges": "entry 2: from 10.0.0.1 and to ::1 are not of the same family", "ip_addresses": `"bad" is not`}},
		{"nothing", protection.ConditionConfig{Family: protection.FamilyIPSources, DisplayName: "Office"}, map[string]string{"ip_addresses": "at least one"}},
		{"too many", protection.ConditionConfig{Family: protection.FamilyIPSources, DisplayName: "Office", IPAddresses: strings.Repeat("10.0.0.1,", 1001)},
			map[string]string{"ip_addresses": "more than 1000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			err := protection.ValidateConditionConfig(&c)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			got := causesOf(err)
			if len(got) != len(tc.want) {
				t.Fatalf("causes %v, want one per field of %v", got, tc.want)
			}
			for f, part := range tc.want {
				if !strings.Contains(got[f], part) {
					t.Errorf("%s: %q, want %q in it", f, got[f], part)
				}
			}
		})
	}
	// Canonical forms.
	c := protection.ConditionConfig{Family: protection.FamilyIPSources, DisplayName: " Office ", IPAddresses: "10.1.2.3/8, 192.0.2.1,2001:DB8::/32,::ffff:198.51.100.7, 192.0.2.1",
		IPAddressRanges: []protection.IPRange{{From: " 2001:db8::1", To: "2001:DB8::FF"}}, Countries: []string{"FR"}, Timezone: "UTC"}
	if err := protection.ValidateConditionConfig(&c); err != nil {
		t.Fatal(err)
	}
	if c.IPAddresses != "10.0.0.0/8,192.0.2.1,2001:db8::/32,198.51.100.7" || c.IPAddressRanges[0] != (protection.IPRange{From: "2001:db8::1", To: "2001:db8::ff"}) ||
		len(c.Countries) != 0 || c.Timezone != "" || c.DisplayName != "Office" {
		t.Errorf("canonical %+v", c)
	}
	g := protection.ConditionConfig{Family: protection.FamilyGeolocations, DisplayName: "x", Countries: []string{"fr", "de", "FR"}}
	if err := protection.ValidateConditionConfig(&g); err != nil || strings.Join(g.Countries, ",") != "FR,DE" {
		t.Errorf("countries %v %v", g.Countries, err)
	}
}

func TestConditionConfig_IPSet(t *testing.T) {
	c := protection.ConditionConfig{Family: protection.FamilyIPSources, DisplayName: "x", IPAddresses: "10.0.0.0/8,192.0.2.1,2001:db8::/32",
		IPAddressRanges: []protection.IPRange{{From: "198.51.100.10", To: "198.51.100.20"}, {From: "2001:db9::1", To: "2001:db9::ff"}}}
	if err := protection.ValidateConditionConfig(&c); err != nil {
		t.Fatal(err)
	}
	set, err := c.IPSet()
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"10.255.0.1": true, "11.0.0.1": false, "192.0.2.1": true, "192.0.2.2": false, "::ffff:10.1.1.1": true,
		"2001:db8:1::5": true, "2001:db7::1": false, "198.51.100.10": true, "198.51.100.20": true, "198.51.100.21": false,
		"2001:db9::80": true, "2001:db9::100": false, "::ffff:198.51.100.15": true,
	} {
		if got := set.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestConditionConfig_InBusinessHours(t *testing.T) {
	// New York, Monday to Friday 9:00–17:00, and a night shift 22:00–24:00
	// on Saturday (across midnight into Sunday 00:00–02:00).
	bitmap := []byte(week(workdays, 9, 17))
	for h := 22; h < 24; h++ {
		bitmap[6*24+h] = '1'
	}
	for h := 0; h < 2; h++ {
		bitmap[h] = '1'
	}
	c := protection.ConditionConfig{Family: protection.FamilyBusinessHours, DisplayName: "NY", BusinessHoursBitmap: string(bitmap), Timezone: "America/New_York"}
	if err := protection.ValidateConditionConfig(&c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   string
		want bool
	}{
		{"2026-03-06T14:30:00Z", true},  // Friday 09:30 EST
		{"2026-03-06T13:30:00Z", false}, // Friday 08:30 EST
		{"2026-03-09T13:30:00Z", true},  // Monday 09:30 EDT (after the change on Sunday 8 March)
		{"2026-03-09T21:30:00Z", false}, // Monday 17:30 EDT
		{"2026-03-08T03:30:00Z", true},  // Saturday 22:30 EST
		{"2026-03-08T06:30:00Z", true},  // Sunday 01:30 EST
		{"2026-03-08T07:30:00Z", false}, // Sunday 03:30 EDT
	} {
		at, _ := time.Parse(time.RFC3339, tc.at)
		got, err := c.InBusinessHours(at)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.at, got, err, tc.want)
		}
	}
}

func TestConditionConfigStore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		office := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: "Office", IPAddresses: "192.0.2.0/24", IsTrustedSource: true}
		vpn := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: "VPN", IPAddresses: "198.51.100.1"}
		hours := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyBusinessHours, DisplayName: "Office", BusinessHoursBitmap: week(workdays, 9, 17), Timezone: "Europe/Paris"}
		for _, c := range []*protection.ConditionConfig{office, vpn, hours} {
			if err := store.ConditionConfigs.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		dup := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: "office", IPAddresses: "10.0.0.1"}
		if err := store.ConditionConfigs.Create(ctx, dup); models.ErrorCode(err) != models.ECONFLICT {
			t.Errorf("duplicate name: %v", err)
		}
		// Get in its family only, and only in its organization.
		if _, err := store.ConditionConfigs.Get(ctx, org.ID, protection.FamilyGeolocations, office.ID); !errors.Is(err, protection.ErrConfigNotFound) {
			t.Errorf("other family: %v", err)
		}
		if _, err := store.ConditionConfigs.Get(ctx, other.ID, protection.FamilyIPSources, office.ID); !errors.Is(err, protection.ErrConfigNotFound) {
			t.Errorf("other org: %v", err)
		}
		params, err := listing.Parse(url.Values{"filter": {`is_trusted_source eq false`}}, protection.ConditionConfigListing(protection.FamilyIPSources))
		if err != nil {
			t.Fatal(err)
		}
		list, meta, err := store.ConditionConfigs.List(ctx, org.ID, protection.FamilyIPSources, params)
		if err != nil || len(list) != 1 || list[0].ID != vpn.ID {
			t.Fatalf("list %v %v", list, err)
		}
		if m := meta.(*listing.OffsetMeta); m.Total != 1 {
			t.Errorf("meta %+v", m)
		}
		// Update: checked whole, family and id kept.
		got, err := store.ConditionConfigs.Update(ctx, org.ID, protection.FamilyIPSources, vpn.ID, func(cur *protection.ConditionConfig) (*protection.ConditionConfig, error) {
			cur.IPAddresses = "198.51.100.0/24 , 203.0.113.5"
			cur.Family = protection.FamilyGeolocations
			return cur, nil
		})
		if err != nil || got.IPAddresses != "198.51.100.0/24,203.0.113.5" || got.Family != protection.FamilyIPSources {
			t.Fatalf("update %+v %v", got, err)
		}
		_, err = store.ConditionConfigs.Update(ctx, org.ID, protection.FamilyIPSources, vpn.ID, func(cur *protection.ConditionConfig) (*protection.ConditionConfig, error) {
			cur.IPAddresses = "nope"
			return cur, nil
		})
		if causesOf(err)["ip_addresses"] == "" {
			t.Errorf("invalid update: %v", err)
		}

		// A policy naming office: the count follows, and delete says 409.
		p := policyWith(org.ID, protection.PolicyCondition{SequenceNumber: 1, FactorType: "ipaddress", Comparator: "in", FactorConfigs: []protection.RefID{protection.RefID(office.ID)}})
		p.Name = "Office only"
		if err = store.Policies.Create(ctx, p, protection.PolicyActor{}); err != nil {
			t.Fatal(err)
		}
		c, err := store.ConditionConfigs.Get(ctx, org.ID, protection.FamilyIPSources, office.ID)
		if err != nil || c.UsageCount != 1 {
			t.Fatalf("usage %v %v", c, err)
		}
		res, err := store.ConditionConfigs.DeleteMany(ctx, org.ID, protection.FamilyIPSources, []int64{office.ID, vpn.ID, hours.ID, 42})
		if err != nil {
			t.Fatal(err)
		}
		if res[vpn.ID] != nil || !errors.Is(res[hours.ID], protection.ErrConfigNotFound) || !errors.Is(res[42], protection.ErrConfigNotFound) ||
			models.ErrorCode(res[office.ID]) != models.ECONFLICT || !strings.Contains(res[office.ID].Error(), `"Office only"`) {
			t.Errorf("delete results %v", res)
		}
		if _, err := store.ConditionConfigs.Get(ctx, org.ID, protection.FamilyIPSources, vpn.ID); !errors.Is(err, protection.ErrConfigNotFound) {
			t.Errorf("deleted config: %v", err)
		}
		// Another organization cannot delete it.
		res, _ = store.ConditionConfigs.DeleteMany(ctx, other.ID, protection.FamilyBusinessHours, []int64{hours.ID})
		if !errors.Is(res[hours.ID], protection.ErrConfigNotFound) {
			t.Errorf("other org delete %v", res)
		}
		// Once the policy is gone, the count drops and delete works.
		if err := store.Policies.Delete(ctx, org.ID, p.ID); err != nil {
			t.Fatal(err)
		}
		if c, _ := store.ConditionConfigs.Get(ctx, org.ID, protection.FamilyIPSources, office.ID); c.UsageCount != 0 {
			t.Errorf("usage after delete %d", c.UsageCount)
		}
		res, _ = store.ConditionConfigs.DeleteMany(ctx, org.ID, protection.FamilyIPSources, []int64{office.ID})
		if res[office.ID] != nil {
			t.Errorf("delete unused %v", res)
		}
	})
}
