package protection_test

import (
	"net/url"
	"slices"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/identity"
	"iam/models/listing"
	"iam/models/modeltest"
	"iam/models/protection"
)

func TestDeviceGroups_Store(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		dg := f.Store.DeviceGroups
		svc := modeltest.Facts("PC1", "S1")
		svc.JoinType = devices.JoinSvc // deleting it removes it from every list at once
		d1, _ := f.Register(t, svc)
		d2, _ := f.Register(t, modeltest.Facts("PC2", "S2"))
		other := modeltest.NewDeviceFixture(t, db, 0)
		foreign, _ := other.Register(t, modeltest.Facts("PC9", "S9"))

		v0, err := dg.ProtectionVersion(ctx, f.Org.ID)
		if err != nil {
			t.Fatal(err)
		}
		g := &protection.DeviceGroup{OrgID: f.Org.ID, Name: " Laptops ", Description: "all laptops"}
		if err = dg.Create(ctx, g, []int64{d1.ID, d1.ID}); err != nil {
			t.Fatal(err)
		}
		if g.Name != "Laptops" || g.MembersCount != 1 {
			t.Fatalf("created %+v", g)
		}
		if v1, _ := dg.ProtectionVersion(ctx, f.Org.ID); v1 <= v0 {
			t.Fatalf("version %d after %d", v1, v0)
		}
		// Names are unique ignoring case; a device of another organization
		// is no member candidate; another organization does not see the group.
		if err = dg.Create(ctx, &protection.DeviceGroup{OrgID: f.Org.ID, Name: "LAPTOPS"}, nil); models.ErrorCode(err) != models.ECONFLICT {
			t.Fatalf("duplicate name: %v", err)
		}
		if err = dg.Create(ctx, &protection.DeviceGroup{OrgID: f.Org.ID, Name: "x"}, []int64{foreign.ID}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("foreign device: %v", err)
		}
		if _, err = dg.Get(ctx, other.Org.ID, g.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("other org get: %v", err)
		}
		if _, err = dg.AddMembers(ctx, other.Org.ID, g.ID, []int64{foreign.ID}); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("other org add: %v", err)
		}
		got, err := dg.AddMembers(ctx, f.Org.ID, g.ID, []int64{d2.ID, d1.ID})
		if err != nil || got.MembersCount != 2 {
			t.Fatalf("add: %+v %v", got, err)
		}
		groups, err := dg.GroupsOfDevice(ctx, f.Org.ID, d2.ID)
		if err != nil || len(groups) != 1 || groups[0] != g.ID {
			t.Fatalf("groups of device: %v %v", groups, err)
		}
		if groups, _ := dg.GroupsOfDevice(ctx, other.Org.ID, d2.ID); len(groups) != 0 {
			t.Fatalf("groups of device seen by another org: %v", groups)
		}
		miss, err := dg.MissingGroups(ctx, f.Org.ID, []int64{g.ID, 42})
		if err != nil || len(miss) != 1 || miss[0] != 42 {
			t.Fatalf("missing groups: %v %v", miss, err)
		}
		if miss, _ = dg.MissingGroups(ctx, other.Org.ID, []int64{g.ID}); len(miss) != 1 {
			t.Fatalf("missing groups of another org: %v", miss)
		}
		miss, err = dg.MissingDevices(ctx, f.Org.ID, []int64{d1.ID, foreign.ID})
		if err != nil || len(miss) != 1 || miss[0] != foreign.ID {
			t.Fatalf("missing devices: %v %v", miss, err)
		}

		params := func(q string) listing.Params {
			v, _ := url.ParseQuery(q)
			p, parseErr := listing.Parse(v, protection.DeviceGroupMemberListing)
			if parseErr != nil {
				t.Fatal(parseErr)
			}
			return p
		}
		members, meta, err := dg.Members(ctx, f.Org.ID, g.ID, params("limit=1"))
		if err != nil || len(members) != 1 || members[0].Name != "PC1" || meta.(*listing.OffsetMeta).Total != 2 {
			t.Fatalf("members: %+v %+v %v", members, meta, err)
		}
		// A deleted device leaves the counts and lists.
		if _, err = f.Dev.Delete(ctx, f.Org.ID, d1.ID); err != nil {
			t.Fatal(err)
		}
		if got, _ = dg.Get(ctx, f.Org.ID, g.ID); got.MembersCount != 1 {
			t.Fatalf("count after device delete: %d", got.MembersCount)
		}
		got, err = dg.RemoveMembers(ctx, f.Org.ID, g.ID, []int64{d2.ID, 7})
		if err != nil || got.MembersCount != 0 {
			t.Fatalf("remove: %+v %v", got, err)
		}
		name := "Desktops"
		if got, err = dg.Update(ctx, f.Org.ID, g.ID, protection.DeviceGroupChange{Name: &name}); err != nil || got.Name != "Desktops" || got.Description != "all laptops" {
			t.Fatalf("update: %+v %v", got, err)
		}
		lp, _ := listing.Parse(url.Values{"filter": {`name eq "Desktops"`}}, protection.DeviceGroupListing)
		list, _, err := dg.List(ctx, f.Org.ID, lp)
		if err != nil || len(list) != 1 {
			t.Fatalf("list: %+v %v", list, err)
		}
		if err := dg.Delete(ctx, f.Org.ID, g.ID); err != nil {
			t.Fatal(err)
		}
		if err := dg.Delete(ctx, f.Org.ID, g.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("second delete: %v", err)
		}
	})
}

// TestDeviceGroups_DecisionFacts: one query gives a decision the protection
// version, the user's groups and the device's device groups; a user or
// device of another organization, or a deleted device, does not exist.
func TestDeviceGroups_DecisionFacts(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 2)
		dg := f.Store.DeviceGroups
		other := modeltest.NewDeviceFixture(t, db, 1)
		d1, _ := f.Register(t, modeltest.Facts("PC1", "S1"))
		d2, _ := f.Register(t, modeltest.Facts("PC2", "S2"))
		foreign, _ := other.Register(t, modeltest.Facts("PC9", "S9"))
		var devGroups []int64
		for _, name := range []string{"B", "A"} {
			g := &protection.DeviceGroup{OrgID: f.Org.ID, Name: name}
			if err := dg.Create(ctx, g, []int64{d1.ID}); err != nil {
				t.Fatal(err)
			}
			devGroups = append(devGroups, g.ID)
		}
		slices.Sort(devGroups)
		var userGroups []int64
		for _, name := range []string{"Team A", "Team B"} {
			g := &identity.Group{OrgID: f.Org.ID, Name: name}
			if err := f.Store.Groups.Create(ctx, g, nil, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Store.Groups.AddMembers(ctx, f.Org.ID, g.ID, []int64{f.Users[0].ID}); err != nil {
				t.Fatal(err)
			}
			userGroups = append(userGroups, g.ID)
		}
		version, err := dg.ProtectionVersion(ctx, f.Org.ID)
		if err != nil || version == 0 {
			t.Fatalf("version %d %v", version, err)
		}
		got, err := dg.DecisionFacts(ctx, f.Org.ID, f.Users[0].ID, d1.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.UserExists || !got.DeviceExists || got.Version != version || !slices.Equal(got.UserGroups, userGroups) || !slices.Equal(got.DeviceGroups, devGroups) {
			t.Errorf("facts %+v, want user groups %v, device groups %v, version %d", got, userGroups, devGroups, version)
		}
		// A user in no group, a device in none, no device asked about.
		if got, err := dg.DecisionFacts(ctx, f.Org.ID, f.Users[1].ID, d2.ID); err != nil || !got.UserExists || !got.DeviceExists || len(got.UserGroups)+len(got.DeviceGroups) != 0 || got.Version != version {
			t.Errorf("no groups: %+v %v", got, err)
		}
		if got, err := dg.DecisionFacts(ctx, f.Org.ID, f.Users[0].ID, 0); err != nil || !got.UserExists || got.DeviceExists || len(got.DeviceGroups) != 0 {
			t.Errorf("no device: %+v %v", got, err)
		}
		// Another organization's user and device do not exist here.
		if got, err := dg.DecisionFacts(ctx, f.Org.ID, other.Users[0].ID, foreign.ID); err != nil || got.UserExists || got.DeviceExists || len(got.UserGroups)+len(got.DeviceGroups) != 0 {
			t.Errorf("foreign user and device: %+v %v", got, err)
		}
		// A deleted device does not exist (a SvcJoined one leaves at once).
		svc := modeltest.Facts("PC3", "S3")
		svc.JoinType = devices.JoinSvc
		d3, _ := f.Register(t, svc)
		if got, err := dg.DecisionFacts(ctx, f.Org.ID, f.Users[0].ID, d3.ID); err != nil || !got.DeviceExists {
			t.Fatalf("before deletion: %+v %v", got, err)
		}
		if _, err := f.Dev.Delete(ctx, f.Org.ID, d3.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := dg.DecisionFacts(ctx, f.Org.ID, f.Users[0].ID, d3.ID); err != nil || got.DeviceExists {
			t.Errorf("deleted device: %+v %v", got, err)
		}
	})
}
