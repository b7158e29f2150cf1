package protection_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/listing"
	"iam/models/modeltest"
	"iam/models/protection"
	"iam/models/store"
)

// policyWith returns a valid policy of org for the NPS endpoint with the
// given conditions, joined with "and".
func policyWith(orgID int64, conds ...protection.PolicyCondition) *protection.Policy {
	p := &protection.Policy{OrgID: orgID, Name: "P", IsEnabled: true, AccessType: protection.AccessDeny,
		EndpointsSettings: []protection.EndpointSetting{{Endpoint: protection.EndpointNPS}}}
	var seqs []string
	for _, c := range conds {
		p.Conditions = append(p.Conditions, c)
		seqs = append(seqs, strings.TrimSpace(strings.Repeat(" ", 0)+itoa(c.SequenceNumber)))
	}
	p.CriteriaExpression = strings.Join(seqs, " and ")
	return p
}

func itoa(n int) string {
	return strconv.Itoa(n)
}

func TestPolicyStore_DefaultAndPriorities(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)

		// Concurrent first reads agree on one default policy.
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := store.Policies.List(ctx, org.ID, listing.Params{}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		all := func() []protection.Policy {
			t.Helper()
			p, err := listing.Parse(url.Values{}, protection.PolicyListing)
			if err != nil {
				t.Fatal(err)
			}
			list, _, err := store.Policies.List(ctx, org.ID, p)
			if err != nil {
				t.Fatal(err)
			}
			return list
		}
		list := all()
		if len(list) != 1 || !list[0].IsDefault || list[0].Priority != 1 || list[0].Name != protection.DefaultPolicyName {
			t.Fatalf("default %+v", list)
		}
		def := list[0]

		var ids []int64
		for _, name := range []string{"A", "B", "C"} {
			p := policyWith(org.ID)
			p.Name = name
			if err := store.Policies.Create(ctx, p, protection.PolicyActor{ClientID: "cli"}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, p.ID)
		}
		order := func() string {
			var s []string
			for _, p := range all() {
				s = append(s, p.Name+":"+itoa(int(p.Priority)))
			}
			return strings.Join(s, " ")
		}
		if got := order(); got != "A:1 B:2 C:3 Default Policy:4" {
			t.Errorf("order %s", got)
		}
		// Reorder: every non-default policy once.
		for _, bad := range [][]int64{{ids[2], ids[0]}, {ids[2], ids[0], ids[1], def.ID}, {ids[2], ids[0], ids[0]}, {ids[2], ids[0], 7}} {
			if err := store.Policies.Reorder(ctx, org.ID, bad); models.ErrorCode(err) != models.EINVALID {
				t.Errorf("reorder %v: %v", bad, err)
			}
		}
		if err := store.Policies.Reorder(ctx, org.ID, []int64{ids[2], ids[0], ids[1]}); err != nil {
			t.Fatal(err)
		}
		if got := order(); got != "C:1 A:2 B:3 Default Policy:4" {
			t.Errorf("order %s", got)
		}
		// Delete: the default cannot go; others close the gap.
		if err := store.Policies.Delete(ctx, org.ID, def.ID); models.ErrorCode(err) != models.ECONFLICT {
			t.Errorf("delete default: %v", err)
		}
		if err := store.Policies.Delete(ctx, other.ID, ids[0]); !errors.Is(err, protection.ErrPolicyNotFound) {
			t.Errorf("delete from other org: %v", err)
		}
		if err := store.Policies.Delete(ctx, org.ID, ids[0]); err != nil {
			t.Fatal(err)
		}
		if got := order(); got != "C:1 B:2 Default Policy:3" {
			t.Errorf("order %s", got)
		}
		// Names unique, the default's name reserved.
		p := policyWith(org.ID)
		p.Name = "c"
		if err := store.Policies.Create(ctx, p, protection.PolicyActor{}); models.ErrorCode(err) != models.ECONFLICT {
			t.Errorf("duplicate name: %v", err)
		}
		p.Name = "default policy"
		if err := store.Policies.Create(ctx, p, protection.PolicyActor{}); causesOf(err)["name"] == "" {
			t.Errorf("default's name: %v", err)
		}
		// The default may change its access and settings, not its name,
		// conditions or assignments, and is never disabled.
		_, err := store.Policies.Update(ctx, org.ID, def.ID, protection.PolicyActor{}, func(cur *protection.Policy) (*protection.Policy, error) {
			cur.IsEnabled = false
			cur.UserIDs = []int64{1}
			return cur, nil
		})
		if c := causesOf(err); c["is_enabled"] == "" || c["user_assignments"] == "" {
			t.Errorf("default update: %v", err)
		}
		got, err := store.Policies.Update(ctx, org.ID, def.ID, protection.PolicyActor{ClientID: "cli"}, func(cur *protection.Policy) (*protection.Policy, error) {
			cur.AccessType = protection.AccessDeny
			return cur, nil
		})
		if err != nil || got.AccessType != protection.AccessDeny || got.Priority != 3 || got.UpdatedByName != "cli" {
			t.Errorf("default update %+v %v", got, err)
		}
		// Another organization sees none of it.
		if _, err := store.Policies.Get(ctx, other.ID, ids[1]); !errors.Is(err, protection.ErrPolicyNotFound) {
			t.Errorf("get from other org: %v", err)
		}
	})
}

func TestPolicyStore_Validation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		ips := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: "Office", IPAddresses: "192.0.2.0/24"}
		geo := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyGeolocations, DisplayName: "EU", Countries: []string{"FR"}}
		foreign := &protection.ConditionConfig{OrgID: other.ID, Family: protection.FamilyIPSources, DisplayName: "Theirs", IPAddresses: "10.0.0.1"}
		for _, c := range []*protection.ConditionConfig{ips, geo, foreign} {
			if err := store.ConditionConfigs.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		factors, err := store.Factors.List(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		user := modeltest.NewUser(t, db, org.ID, "ann@example.com", identity.RoleUser)
		cond := func(seq int, typ string, ids ...int64) protection.PolicyCondition {
			c := protection.PolicyCondition{SequenceNumber: seq, FactorType: typ, Comparator: "in"}
			for _, id := range ids {
				c.FactorConfigs = append(c.FactorConfigs, protection.RefID(id))
			}
			return c
		}
		for _, tc := range []struct {
			name   string
			change func(p *protection.Policy)
			want   map[string]string
		}{
			{"valid", func(p *protection.Policy) {}, nil},
			{"expression syntax", func(p *protection.Policy) { p.CriteriaExpression = "1 and (2" },
				map[string]string{"access_conditions.criteria_expression": "at character 9"}},
			{"unknown number", func(p *protection.Policy) { p.CriteriaExpression = "1 and 2 and 3" },
				map[string]string{"access_conditions.criteria_expression": "sequence number(s) 3 that no condition has"}},
			{"unused condition", func(p *protection.Policy) { p.CriteriaExpression = "1" },
				map[string]string{"access_conditions.criteria_expression": "does not use the condition(s) with sequence number(s) 2"}},
			{"wrong family and other org", func(p *protection.Policy) {
				p.Conditions[0].FactorConfigs = []protection.RefID{protection.RefID(geo.ID)}
				p.Conditions[1].FactorConfigs = []protection.RefID{protection.RefID(foreign.ID)}
			}, map[string]string{
				"access_conditions.conditions[0].factor_configs": "is a geolocations config; this condition takes ipsources configs",
				"access_conditions.conditions[1].factor_configs": "no conditional factor config with id",
			}},
			{"bad condition fields", func(p *protection.Policy) {
				p.Conditions[1].SequenceNumber = 1
				p.Conditions[1].Comparator = "like"
				p.Conditions[1].IncludeAllTrustedSources = true
			}, map[string]string{
				"access_conditions.conditions[1].sequence_number":             "used by another",
				"access_conditions.conditions[1].comparator":                  "in or not_in",
				"access_conditions.conditions[1].include_all_trusted_sources": "ipaddress conditions only",
				"access_conditions.criteria_expression":                       "that no condition has",
			}},
			{"users", func(p *protection.Policy) { p.UserIDs = []int64{user.ID, 99}; p.GroupIDs = []int64{98} },
				map[string]string{"user_assignments.user_ids": "no user with id 99", "user_assignments.group_ids": "no group with id 98"}},
			{"endpoint rules", func(p *protection.Policy) {
				p.EndpointsSettings = []protection.EndpointSetting{
					{Endpoint: "ComputerDevices", Actions: []string{"RDP", "delete_users"}},
					{Endpoint: "IdentityServer", Type: "NPS_VPN"},
					{Endpoint: "NPS", Actions: []string{"RDP"}, AppAssignment: &protection.AppAssignment{AppIDs: []string{"x"}}},
					{Endpoint: "NPS"},
					{Endpoint: "Mainframe"},
				}
			}, map[string]string{
				"endpoints_settings[0].actions":           `"delete_users" is not an action of ComputerDevices`,
				"endpoints_settings[0].device_assignment": "name devices",
				"endpoints_settings[1].type":              "must be Login or SensitiveActions for IdentityServer",
				"endpoints_settings[2].actions":           "must be empty for NPS_VPN",
				"endpoints_settings[2].app_assignment":    "SSOApplications only",
				"endpoints_settings[3].endpoint":          "one entry per endpoint",
				"endpoints_settings[4].endpoint":          "must be one of",
			}},
			{"factors", func(p *protection.Policy) {
				s := &p.EndpointsSettings[0]
				s.PrimaryAuthentication = protection.PrimaryAuthentication{IsPasswordlessEnabled: true,
					FactorConfigs: []protection.PrimaryFactor{{AuthnFactorConfigID: protection.RefID(factors[0].ID), VerificationOrder: 1}, {AuthnFactorConfigID: 77, VerificationOrder: 3}}}
				s.SecondaryAuthentication = protection.SecondaryAuthentication{IsMFAEnabled: true, NoOfRequiredFactors: 3, AuthnMode: "sms",
					FactorConfigs: []protection.SecondaryFactor{{AuthnFactorConfigID: protection.RefID(factors[1].ID), VerificationOrder: 1}}}
				s.AdvancedSettings = protection.EndpointAdvancedSettings{MFATimeout: 5, MFAUnenrolledAction: "maybe",
					MFATrust: protection.MFATrust{IsEnabled: true, Duration: protection.TrustDuration{Value: 91, Unit: "days"}}}
			}, map[string]string{
				"endpoints_settings[0].primary_authentication.factor_configs":           "1 to 2, each once",
				"endpoints_settings[0].secondary_authentication.authn_mode":             "native or secure_link",
				"endpoints_settings[0].secondary_authentication.no_of_required_factors": "must be 1 to 1",
				"endpoints_settings[0].advanced_settings.mfa_timeout":                   "30 to 3600",
				"endpoints_settings[0].advanced_settings.mfa_unenrolled_action":         "allow or deny",
				"endpoints_settings[0].advanced_settings.mfa_trust.duration.value":      "1 to 90 days",
			}},
			{"unknown factor config", func(p *protection.Policy) {
				p.EndpointsSettings[0].SecondaryAuthentication = protection.SecondaryAuthentication{IsMFAEnabled: true, NoOfRequiredFactors: 1,
					FactorConfigs: []protection.SecondaryFactor{{AuthnFactorConfigID: 77, VerificationOrder: 1}}}
			}, map[string]string{"endpoints_settings[0].secondary_authentication.factor_configs": "no factor config with id 77"}},
			{"radius", func(p *protection.Policy) {
				p.EndpointsSettings[0].AdvancedSettings.RadiusResponseConfig = &protection.RadiusResponseConfig{VendorID: "311",
					AttributesList: []protection.RadiusAttribute{{Type: "vendor", Number: 25, DataType: "ipv4address", Value: "::1"}, {Type: "standard", Number: 300, DataType: "integer", Value: "12"}}}
			}, map[string]string{
				"endpoints_settings[0].advanced_settings.radius_response_config.attributes_list[0].value":  "ipv4address",
				"endpoints_settings[0].advanced_settings.radius_response_config.attributes_list[1].number": "1 to 255",
			}},
			{"policy advanced", func(p *protection.Policy) {
				p.AdvancedSettings = protection.PolicyAdvancedSettings{IsCaptchaEnabled: true, CaptchaFrequencyType: "after_failed_attempts", MobilenoSelectionMode: "any"}
			}, map[string]string{
				"advanced_settings.captcha_failed_attempts_threshold": "1 to 100",
				"advanced_settings.mobileno_selection_mode":           "primary, select or input",
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := policyWith(org.ID, cond(1, "ipaddress", ips.ID), cond(2, "geolocation", geo.ID))
				p.Name = tc.name
				p.UserIDs = []int64{user.ID}
				tc.change(p)
				err := store.Policies.Create(ctx, p, protection.PolicyActor{UserID: user.ID})
				if tc.want == nil {
					if err != nil {
						t.Fatal(err)
					}
					got, getErr := store.Policies.Get(ctx, org.ID, p.ID)
					if getErr != nil {
						t.Fatal(getErr)
					}
					if got.CriteriaExpression != "1 and 2" || len(got.Conditions) != 2 || got.Conditions[1].FactorConfigs[0] != protection.RefID(geo.ID) ||
						len(got.UserIDs) != 1 || got.UpdatedByName != "ann@example.com" || got.EndpointsSettings[0].Type != "NPS_VPN" ||
						got.EndpointsSettings[0].SecondaryAuthentication.AuthnMode != "native" || got.EndpointsSettings[0].AdvancedSettings.MFATimeout != 300 {
						t.Errorf("stored %+v", got)
					}
					return
				}
				got := causesOf(err)
				if len(got) != len(tc.want) {
					t.Errorf("causes %v, want one per field of %v", got, tc.want)
				}
				for f, part := range tc.want {
					if !strings.Contains(got[f], part) {
						t.Errorf("%s: %q, want %q in it", f, got[f], part)
					}
				}
			})
		}
	})
}

func TestPolicyStore_LoadEnabledPolicies(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		trusted := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: "Trusted", IPAddresses: "192.0.2.0/24", IsTrustedSource: true}
		hours := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyBusinessHours, DisplayName: "Hours", BusinessHoursBitmap: week(workdays, 9, 17), Timezone: "UTC"}
		unused := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyGeolocations, DisplayName: "Unused", Countries: []string{"FR"}}
		for _, c := range []*protection.ConditionConfig{trusted, hours, unused} {
			if err := store.ConditionConfigs.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		user := modeltest.NewUser(t, db, org.ID, "bob@example.com", identity.RoleUser)
		first := policyWith(org.ID, protection.PolicyCondition{SequenceNumber: 1, FactorType: "ipaddress", Comparator: "not_in", IncludeAllTrustedSources: true},
			protection.PolicyCondition{SequenceNumber: 2, FactorType: "time", Comparator: "in", FactorConfigs: []protection.RefID{protection.RefID(hours.ID)}})
		first.Name, first.UserIDs = "First", []int64{user.ID}
		disabled := policyWith(org.ID)
		disabled.Name, disabled.IsEnabled = "Disabled", false
		for _, p := range []*protection.Policy{first, disabled} {
			if err := store.Policies.Create(ctx, p, protection.PolicyActor{}); err != nil {
				t.Fatal(err)
			}
		}
		set, err := store.Policies.LoadEnabledPolicies(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(set.Policies) != 2 || set.Policies[0].ID != first.ID || !set.Policies[1].IsDefault {
			t.Fatalf("policies %+v", set.Policies)
		}
		p := set.Policies[0]
		if len(p.Conditions) != 2 || !p.Conditions[0].IncludeAllTrustedSources || p.Conditions[1].FactorConfigs[0] != protection.RefID(hours.ID) || p.UserIDs[0] != user.ID {
			t.Errorf("first %+v", p)
		}
		if len(set.Configs) != 2 || set.Configs[hours.ID] == nil || set.Configs[trusted.ID] == nil || len(set.TrustedSources) != 1 {
			t.Errorf("configs %v trusted %v", set.Configs, set.TrustedSources)
		}
		if !set.Policies[1].Setting(protection.EndpointComputerDevices).DeviceAssignment.AllDevicesGroupSelected {
			t.Error("default policy does not protect all devices")
		}
	})
}

func TestPolicyStore_SubLists(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		f := modeltest.NewDeviceFixture(t, db, 3)
		store, org := f.Store, f.Org
		other := modeltest.NewOrg(t, store)
		d1, _ := f.Register(t, modeltest.Facts("PC-1", "S1"))
		d2, _ := f.Register(t, modeltest.Facts("PC-2", "S2"))
		d3, _ := f.Register(t, modeltest.Facts("PC-3", "S3"))
		_, _ = f.Register(t, modeltest.Facts("PC-4", "S4"))
		g := &identity.Group{OrgID: org.ID, Name: "Sales"}
		if err := store.Groups.Create(ctx, g, nil, nil); err != nil {
			t.Fatal(err)
		}
		dg := &protection.DeviceGroup{OrgID: org.ID, Name: "Lab"}
		if err := store.DeviceGroups.Create(ctx, dg, []int64{d3.ID}); err != nil {
			t.Fatal(err)
		}
		p := policyWith(org.ID)
		p.Name, p.UserIDs, p.GroupIDs = "Devices", []int64{f.Users[0].ID, f.Users[2].ID}, []int64{g.ID}
		p.EndpointsSettings = []protection.EndpointSetting{{Endpoint: protection.EndpointComputerDevices, Actions: []string{"RDP"},
			DeviceAssignment: &protection.DeviceAssignment{DeviceIDs: []protection.RefID{protection.RefID(d2.ID), protection.RefID(d1.ID), 5}, GroupIDs: []protection.RefID{protection.RefID(dg.ID), 6}}}}
		err := store.Policies.Create(ctx, p, protection.PolicyActor{})
		if c := causesOf(err); len(c) != 2 || !strings.Contains(c["endpoints_settings[0].device_assignment.device_ids"], "no device with id 5") ||
			!strings.Contains(c["endpoints_settings[0].device_assignment.group_ids"], "no device group with id 6") {
			t.Fatalf("unknown devices: %v", err)
		}
		da := p.EndpointsSettings[0].DeviceAssignment
		da.DeviceIDs, da.GroupIDs = []protection.RefID{protection.RefID(d2.ID), protection.RefID(d1.ID)}, []protection.RefID{protection.RefID(dg.ID)}
		before, err := store.DeviceGroups.ProtectionVersion(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err = store.Policies.Create(ctx, p, protection.PolicyActor{}); err != nil {
			t.Fatal(err)
		}
		if after, _ := store.DeviceGroups.ProtectionVersion(ctx, org.ID); after <= before {
			t.Errorf("protection version %d after a policy create, was %d", after, before)
		}
		dp, _ := listing.Parse(url.Values{}, protection.PolicyDeviceListing)
		devices, _, err := store.Policies.ProtectedDevices(ctx, org.ID, p.ID, dp, nil)
		if err != nil || len(devices) != 3 || devices[0].ID != d1.ID || devices[2].ID != d3.ID {
			t.Fatalf("devices named and through the device group: %v %v", devices, err)
		}
		all, _ := listing.Parse(url.Values{}, protection.PolicyUserListing)
		users, meta, err := store.Policies.AssignedUsers(ctx, org.ID, p.ID, all)
		if err != nil || len(users) != 2 || meta.(*listing.OffsetMeta).Total != 2 {
			t.Fatalf("users %v %v", users, err)
		}
		gp, _ := listing.Parse(url.Values{}, protection.PolicyGroupListing)
		groups, _, err := store.Policies.AssignedGroups(ctx, org.ID, p.ID, gp)
		if err != nil || len(groups) != 1 || groups[0].Name != "Sales" {
			t.Fatalf("groups %v %v", groups, err)
		}
		dp, _ = listing.Parse(url.Values{"filter": {`name eq "PC-2"`}}, protection.PolicyDeviceListing)
		devices, _, err = store.Policies.ProtectedDevices(ctx, org.ID, p.ID, dp, nil)
		if err != nil || len(devices) != 1 || devices[0].ID != d2.ID {
			t.Fatalf("devices %v %v", devices, err)
		}
		// The default policy protects every device.
		set, err := store.Policies.LoadEnabledPolicies(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		dp, _ = listing.Parse(url.Values{}, protection.PolicyDeviceListing)
		devices, _, err = store.Policies.ProtectedDevices(ctx, org.ID, set.Policies[1].ID, dp, nil)
		if err != nil || len(devices) != 4 {
			t.Fatalf("default's devices %v %v", devices, err)
		}
		// A deleted user drops out of the list and the counts.
		if err = store.Users.Delete(ctx, org.ID, f.Users[2].ID); err != nil {
			t.Fatal(err)
		}
		got, err := store.Policies.Get(ctx, org.ID, p.ID)
		if err != nil || len(got.UserIDs) != 1 {
			t.Errorf("after user delete %v %v", got.UserIDs, err)
		}
		// Another organization's id is not found.
		if _, _, err := store.Policies.AssignedUsers(ctx, other.ID, p.ID, all); !errors.Is(err, protection.ErrPolicyNotFound) {
			t.Errorf("other org: %v", err)
		}
	})
}

// TestPolicyStore_CreateRacesConfigDelete runs a policy create naming a
// config against a bulk delete of that config: one of them wins cleanly,
// never both, never an internal error.
func TestPolicyStore_CreateRacesConfigDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		for i := range 10 {
			c := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: "C" + itoa(i), IPAddresses: "10.0.0.1"}
			if err := store.ConditionConfigs.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			p := policyWith(org.ID, protection.PolicyCondition{SequenceNumber: 1, FactorType: "ipaddress", Comparator: "in", FactorConfigs: []protection.RefID{protection.RefID(c.ID)}})
			p.Name = "P" + itoa(i)
			var createErr, deleteErr error
			var res map[int64]error
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); createErr = store.Policies.Create(ctx, p, protection.PolicyActor{}) }()
			go func() {
				defer wg.Done()
				res, deleteErr = store.ConditionConfigs.DeleteMany(ctx, org.ID, protection.FamilyIPSources, []int64{c.ID})
			}()
			wg.Wait()
			if deleteErr != nil {
				t.Fatalf("delete: %v", deleteErr)
			}
			switch {
			case createErr == nil && models.ErrorCode(res[c.ID]) == models.ECONFLICT:
			case res[c.ID] == nil && models.ErrorCode(createErr) == models.EINVALID:
			default:
				t.Fatalf("round %d: create %v, delete %v", i, createErr, res[c.ID])
			}
		}
	})
}

// TestPolicyStore_ConcurrentCreates: policies created at once on a fresh
// organization get priorities 1..n without gaps or repeats, the default last.
func TestPolicyStore_ConcurrentCreates(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		const n = 8
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := policyWith(org.ID)
				p.Name = "P" + itoa(i)
				if err := store.Policies.Create(ctx, p, protection.PolicyActor{}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		params, _ := listing.Parse(url.Values{}, protection.PolicyListing)
		list, _, err := store.Policies.List(ctx, org.ID, params)
		if err != nil || len(list) != n+1 {
			t.Fatalf("%d policies %v", len(list), err)
		}
		for i, p := range list {
			if p.Priority != int64(i+1) || p.IsDefault != (i == n) {
				t.Errorf("position %d: %s priority %d default %v", i, p.Name, p.Priority, p.IsDefault)
			}
		}
	})
}
