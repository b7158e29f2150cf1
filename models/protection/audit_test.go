package protection_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/listing"
	"iam/models/modeltest"
	"iam/models/protection"
	"iam/models/sqldb"
	"iam/models/store"
)

// wantTarget checks target i of ev.
func wantTarget(t *testing.T, ev models.EventRecord, i int, typ string, id int64, name string) {
	t.Helper()
	if len(ev.Targets) <= i {
		t.Fatalf("%s: no target %d: %+v", ev.EventType, i, ev.Targets)
	}
	got := ev.Targets[i]
	if got.Type != typ || got.ID != models.FormatID(id) || got.DisplayName != name {
		t.Errorf("%s target %d = %+v, want %s %d %q", ev.EventType, i, got, typ, id, name)
	}
}

func TestConditionConfigStore_AuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		st := store.NewStore(db)
		org := modeltest.NewOrg(t, st)
		vpn := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: "VPN", IPAddresses: "198.51.100.1"}
		office := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: "Office", IPAddresses: "192.0.2.0/24"}
		for _, c := range []*protection.ConditionConfig{vpn, office} {
			if err := st.ConditionConfigs.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		created := modeltest.EventsOfType(t, db, org.ID, audit.ConditionConfigCreated)
		if len(created) != 2 {
			t.Fatalf("created events %+v", created)
		}
		wantTarget(t, created[0], 0, "condition_config", vpn.ID, "VPN")
		if a := created[0].Actor; a.Type != models.ActorUser || a.ID != "7" || created[0].RequestID != "req-1" || created[0].Client.IPAddress != "192.0.2.7" {
			t.Errorf("origin of %+v", created[0])
		}
		// Refused: a taken name, an invalid update. No event.
		if err := st.ConditionConfigs.Create(ctx, &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: "vpn", IPAddresses: "10.0.0.1"}); models.ErrorCode(err) != models.ECONFLICT {
			t.Fatalf("duplicate: %v", err)
		}
		_, err := st.ConditionConfigs.Update(ctx, org.ID, protection.FamilyIPSources, vpn.ID, func(cur *protection.ConditionConfig) (*protection.ConditionConfig, error) {
			cur.IPAddresses = "nope"
			return cur, nil
		})
		if models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("invalid update: %v", err)
		}
		modeltest.WantEvents(t, db, org.ID, audit.ConditionConfigCreated, 2)
		modeltest.WantEvents(t, db, org.ID, audit.ConditionConfigUpdated, 0)

		_, err = st.ConditionConfigs.Update(ctx, org.ID, protection.FamilyIPSources, vpn.ID, func(cur *protection.ConditionConfig) (*protection.ConditionConfig, error) {
			cur.DisplayName, cur.IPAddresses, cur.IsTrustedSource = "VPN 2", "198.51.100.0/24", true
			return cur, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ev := modeltest.OneEvent(t, db, org.ID, audit.ConditionConfigUpdated)
		wantTarget(t, ev, 0, "condition_config", vpn.ID, "VPN 2")
		want := map[string]string{"display_name": `["VPN","VPN 2"]`, "ip_addresses": `["198.51.100.1","198.51.100.0/24"]`, "is_trusted_source": `[false,true]`}
		if got := modeltest.ChangesOf(t, ev.Targets[0]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("changes %v, want %v", got, want)
		}

		// A config in use is refused; the others go in one event, one
		// target each.
		p := policyWith(org.ID, protection.PolicyCondition{SequenceNumber: 1, FactorType: "ipaddress", Comparator: "in", FactorConfigs: []protection.RefID{protection.RefID(office.ID)}})
		if err = st.Policies.Create(ctx, p, protection.PolicyActor{}); err != nil {
			t.Fatal(err)
		}
		res, err := st.ConditionConfigs.DeleteMany(ctx, org.ID, protection.FamilyIPSources, []int64{office.ID})
		if err != nil || models.ErrorCode(res[office.ID]) != models.ECONFLICT {
			t.Fatalf("delete in use: %v %v", res, err)
		}
		modeltest.WantEvents(t, db, org.ID, audit.ConditionConfigDeleted, 0)
		if err = st.Policies.Delete(ctx, org.ID, p.ID); err != nil {
			t.Fatal(err)
		}
		res, err = st.ConditionConfigs.DeleteMany(ctx, org.ID, protection.FamilyIPSources, []int64{office.ID, vpn.ID, 42})
		if err != nil || res[office.ID] != nil || res[vpn.ID] != nil {
			t.Fatalf("delete: %v %v", res, err)
		}
		ev = modeltest.OneEvent(t, db, org.ID, audit.ConditionConfigDeleted)
		if len(ev.Targets) != 2 {
			t.Fatalf("deleted targets %+v", ev.Targets)
		}
		names := map[string]string{}
		for _, tg := range ev.Targets {
			names[tg.ID] = tg.DisplayName
		}
		if names[models.FormatID(office.ID)] != "Office" || names[models.FormatID(vpn.ID)] != "VPN 2" {
			t.Errorf("deleted targets %+v", ev.Targets)
		}
	})
}

func TestPolicyStore_AuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		st := store.NewStore(db)
		org := modeltest.NewOrg(t, st)
		var ids []int64
		for _, name := range []string{"A", "B", "C"} {
			p := policyWith(org.ID)
			p.Name = name
			if err := st.Policies.Create(ctx, p, protection.PolicyActor{}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, p.ID)
		}
		// The default policy, made with the first change, has its event too.
		created := modeltest.EventsOfType(t, db, org.ID, audit.PolicyCreated)
		if len(created) != 4 {
			t.Fatalf("created events %+v", created)
		}
		def, _, err := st.Policies.List(ctx, org.ID, listingAll(t))
		if err != nil {
			t.Fatal(err)
		}
		defID := def[len(def)-1].ID
		wantTarget(t, created[0], 0, "policy", defID, protection.DefaultPolicyName)
		wantTarget(t, created[1], 0, "policy", ids[0], "A")
		// Refused: a taken name.
		dup := policyWith(org.ID)
		dup.Name = "A"
		if err = st.Policies.Create(ctx, dup, protection.PolicyActor{}); models.ErrorCode(err) != models.ECONFLICT {
			t.Fatalf("duplicate: %v", err)
		}
		modeltest.WantEvents(t, db, org.ID, audit.PolicyCreated, 4)

		// Update: the fields changed, by their JSON names.
		_, err = st.Policies.Update(ctx, org.ID, ids[1], protection.PolicyActor{}, func(cur *protection.Policy) (*protection.Policy, error) {
			cur.Description, cur.IsEnabled = "nights", false
			return cur, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err = st.Policies.Update(ctx, org.ID, defID, protection.PolicyActor{}, func(cur *protection.Policy) (*protection.Policy, error) {
			cur.Name = "renamed"
			return cur, nil
		}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("rename default: %v", err)
		}
		ev := modeltest.OneEvent(t, db, org.ID, audit.PolicyUpdated)
		wantTarget(t, ev, 0, "policy", ids[1], "B")
		want := map[string]string{"description": `["","nights"]`, "is_enabled": `[true,false]`}
		if got := modeltest.ChangesOf(t, ev.Targets[0]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("changes %v, want %v", got, want)
		}

		// Reorder: only the policies that moved, with their priorities.
		if err := st.Policies.Reorder(ctx, org.ID, []int64{ids[0], ids[0], ids[1]}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("bad reorder: %v", err)
		}
		if err := st.Policies.Reorder(ctx, org.ID, ids); err != nil { // nothing moves
			t.Fatal(err)
		}
		modeltest.WantEvents(t, db, org.ID, audit.PolicyPriorityChanged, 0)
		if err := st.Policies.Reorder(ctx, org.ID, []int64{ids[1], ids[0], ids[2]}); err != nil {
			t.Fatal(err)
		}
		ev = modeltest.OneEvent(t, db, org.ID, audit.PolicyPriorityChanged)
		if len(ev.Targets) != 2 {
			t.Fatalf("priority targets %+v", ev.Targets)
		}
		wantTarget(t, ev, 0, "policy", ids[0], "A")
		wantTarget(t, ev, 1, "policy", ids[1], "B")
		if got := modeltest.ChangesOf(t, ev.Targets[0])["priority"]; got != "[1,2]" {
			t.Errorf("A's priority change %s", got)
		}
		if got := modeltest.ChangesOf(t, ev.Targets[1])["priority"]; got != "[2,1]" {
			t.Errorf("B's priority change %s", got)
		}

		// Delete: the default is refused.
		if err := st.Policies.Delete(ctx, org.ID, defID); models.ErrorCode(err) != models.ECONFLICT {
			t.Fatalf("delete default: %v", err)
		}
		modeltest.WantEvents(t, db, org.ID, audit.PolicyDeleted, 0)
		if err := st.Policies.Delete(ctx, org.ID, ids[2]); err != nil {
			t.Fatal(err)
		}
		wantTarget(t, modeltest.OneEvent(t, db, org.ID, audit.PolicyDeleted), 0, "policy", ids[2], "C")
	})
}

func TestDeviceGroupStore_AuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		f := modeltest.NewDeviceFixture(t, db, 0)
		dg := f.Store.DeviceGroups
		d1, _ := f.Register(t, modeltest.Facts("PC1", "S1"))
		d2, _ := f.Register(t, modeltest.Facts("PC2", "S2"))
		other := modeltest.NewDeviceFixture(t, db, 0)
		foreign, _ := other.Register(t, modeltest.Facts("PC9", "S9"))

		g := &protection.DeviceGroup{OrgID: f.Org.ID, Name: "Laptops"}
		if err := dg.Create(ctx, g, []int64{d1.ID}); err != nil {
			t.Fatal(err)
		}
		wantTarget(t, modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceGroupCreated), 0, "device_group", g.ID, "Laptops")
		ev := modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceGroupMembersAdded)
		wantTarget(t, ev, 0, "device_group", g.ID, "Laptops")
		wantTarget(t, ev, 1, "device", d1.ID, "PC1")
		// Refused: a foreign device, a taken name.
		if _, err := dg.AddMembers(ctx, f.Org.ID, g.ID, []int64{d2.ID, foreign.ID}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("foreign member: %v", err)
		}
		if err := dg.Create(ctx, &protection.DeviceGroup{OrgID: f.Org.ID, Name: "laptops"}, nil); models.ErrorCode(err) != models.ECONFLICT {
			t.Fatalf("duplicate: %v", err)
		}
		modeltest.WantEvents(t, db, f.Org.ID, audit.DeviceGroupCreated, 1)
		modeltest.WantEvents(t, db, f.Org.ID, audit.DeviceGroupMembersAdded, 1)

		// Only the devices that were not members yet.
		if _, err := dg.AddMembers(ctx, f.Org.ID, g.ID, []int64{d2.ID, d1.ID}); err != nil {
			t.Fatal(err)
		}
		evs := modeltest.EventsOfType(t, db, f.Org.ID, audit.DeviceGroupMembersAdded)
		if len(evs) != 2 || len(evs[1].Targets) != 2 {
			t.Fatalf("members added %+v", evs)
		}
		wantTarget(t, evs[1], 1, "device", d2.ID, "PC2")
		if _, err := dg.AddMembers(ctx, f.Org.ID, g.ID, []int64{d2.ID}); err != nil { // nothing new
			t.Fatal(err)
		}
		modeltest.WantEvents(t, db, f.Org.ID, audit.DeviceGroupMembersAdded, 2)

		if _, err := dg.RemoveMembers(ctx, f.Org.ID, g.ID, []int64{d1.ID, foreign.ID}); err != nil {
			t.Fatal(err)
		}
		ev = modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceGroupMembersRemoved)
		if len(ev.Targets) != 2 {
			t.Fatalf("members removed %+v", ev.Targets)
		}
		wantTarget(t, ev, 0, "device_group", g.ID, "Laptops")
		wantTarget(t, ev, 1, "device", d1.ID, "PC1")

		if _, err := dg.Update(ctx, f.Org.ID, g.ID, protection.DeviceGroupChange{Name: ptr("")}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("empty name: %v", err)
		}
		modeltest.WantEvents(t, db, f.Org.ID, audit.DeviceGroupUpdated, 0)
		if _, err := dg.Update(ctx, f.Org.ID, g.ID, protection.DeviceGroupChange{Name: ptr("Notebooks"), Description: ptr("all")}); err != nil {
			t.Fatal(err)
		}
		ev = modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceGroupUpdated)
		wantTarget(t, ev, 0, "device_group", g.ID, "Notebooks")
		want := map[string]string{"name": `["Laptops","Notebooks"]`, "description": `["","all"]`}
		if got := modeltest.ChangesOf(t, ev.Targets[0]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("changes %v, want %v", got, want)
		}

		if err := dg.Delete(ctx, other.Org.ID, g.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("delete from another organization: %v", err)
		}
		modeltest.WantEvents(t, db, other.Org.ID, audit.DeviceGroupDeleted, 0)
		if err := dg.Delete(ctx, f.Org.ID, g.ID); err != nil {
			t.Fatal(err)
		}
		wantTarget(t, modeltest.OneEvent(t, db, f.Org.ID, audit.DeviceGroupDeleted), 0, "device_group", g.ID, "Notebooks")
	})
}

// TestDeviceGroupStore_AuditEventsSplit: a change of more than 1,000
// targets is split into events of at most 1,000, the group first in each.
func TestDeviceGroupStore_AuditEventsSplit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		f := modeltest.NewDeviceFixture(t, db, 0)
		ids := insertDevices(t, db, f.Org.ID, protection.MaxDeviceGroupMembersPerRequest)
		g := &protection.DeviceGroup{OrgID: f.Org.ID, Name: "All"}
		if err := f.Store.DeviceGroups.Create(ctx, g, ids); err != nil {
			t.Fatal(err)
		}
		evs := modeltest.EventsOfType(t, db, f.Org.ID, audit.DeviceGroupMembersAdded)
		if len(evs) != 2 || len(evs[0].Targets) != 1000 || len(evs[1].Targets) != 2 {
			t.Fatalf("%d events", len(evs))
		}
		for _, ev := range evs {
			wantTarget(t, ev, 0, "device_group", g.ID, "All")
		}
		wantTarget(t, evs[1], 1, "device", ids[len(ids)-1], fmt.Sprintf("PC%d", len(ids)-1))
	})
}

func TestSettingsStore_AuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		st := store.NewStore(db)
		org := modeltest.NewOrg(t, st)
		_, err := st.Settings.Update(ctx, org.ID, func(cur *protection.AdminSettings) (*protection.AdminSettings, error) {
			cur.CaptchaType = "nope"
			return cur, nil
		})
		if models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("invalid: %v", err)
		}
		modeltest.WantEvents(t, db, org.ID, audit.AdminSettingsUpdated, 0)
		_, err = st.Settings.Update(ctx, org.ID, func(cur *protection.AdminSettings) (*protection.AdminSettings, error) {
			cur.CaptchaType, cur.PasswordlessEnabledForNPSVPN = "text_captcha", true
			return cur, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ev := modeltest.OneEvent(t, db, org.ID, audit.AdminSettingsUpdated)
		wantTarget(t, ev, 0, "admin_settings", org.ID, "Administrator settings")
		// passwordless_enabled_for_nps_vpn holds no secret: its values show.
		want := map[string]string{"captcha_type": `["recaptcha","text_captcha"]`, "passwordless_enabled_for_nps_vpn": "[false,true]"}
		if got := modeltest.ChangesOf(t, ev.Targets[0]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("changes %v, want %v", got, want)
		}
		// Put, in a transaction of its own, writes its event too; ids show
		// whole, as digit strings.
		factors, err := st.Factors.List(ctx, org.ID)
		if err != nil || len(factors) == 0 {
			t.Fatalf("factor configs: %v", err)
		}
		s := protection.DefaultAdminSettings()
		s.OfflineMFA.SecondaryAuthentication.FactorConfigs = []protection.FactorConfigSetting{{AuthnFactorConfigID: factors[0].ID, VerificationOrder: 1}}
		if err := st.Settings.Put(ctx, org.ID, &s); err != nil {
			t.Fatal(err)
		}
		evs := modeltest.EventsOfType(t, db, org.ID, audit.AdminSettingsUpdated)
		if len(evs) != 2 {
			t.Fatalf("%d events", len(evs))
		}
		got := modeltest.ChangesOf(t, evs[1].Targets[0])
		if !strings.Contains(got["offline_mfa_settings"], fmt.Sprintf(`"authn_factor_config_id":"%d"`, factors[0].ID)) || got["captcha_type"] == "" {
			t.Errorf("changes %v", got)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// insertDevices writes n devices of the organization named PC0, PC1...
// straight into their table, and returns their ids in that order.
func insertDevices(t *testing.T, db bun.IDB, orgID int64, n int) []int64 {
	t.Helper()
	type deviceRow struct {
		bun.BaseModel  `bun:"table:devices"`
		ID             int64     `bun:"id"`
		OrgID          int64     `bun:"org_id"`
		Platform       string    `bun:"platform"`
		Name           string    `bun:"name"`
		CheckinSeconds int64     `bun:"checkin_interval_seconds"`
		InstalledAt    time.Time `bun:"agent_installed_time"`
		DateAdded      time.Time `bun:"date_added"`
		UpdatedAt      time.Time `bun:"updated_at"`
	}
	now := time.Now().UTC()
	rows := make([]deviceRow, n)
	ids := make([]int64, n)
	for i := range rows {
		ids[i] = sqldb.NewID()
		rows[i] = deviceRow{ID: ids[i], OrgID: orgID, Platform: "windows", Name: fmt.Sprintf("PC%d", i), CheckinSeconds: 60,
			InstalledAt: now, DateAdded: now, UpdatedAt: now}
	}
	if _, err := db.NewInsert().Model(&rows).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ids
}

// listingAll is the policies' list with its defaults.
func listingAll(t *testing.T) listing.Params {
	t.Helper()
	p, err := listing.Parse(url.Values{}, protection.PolicyListing)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
