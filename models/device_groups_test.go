package models_test

import (
	"net/url"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/listing"
)

func TestDeviceGroups_Store(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newDeviceFixture(t, db, 0)
		dg := f.store.DeviceGroups
		svc := facts("PC1", "S1")
		svc.JoinType = models.JoinSvc // deleting it removes it from every list at once
		d1, _ := f.register(t, svc)
		d2, _ := f.register(t, facts("PC2", "S2"))
		other := newDeviceFixture(t, db, 0)
		foreign, _ := other.register(t, facts("PC9", "S9"))

		v0, err := dg.ProtectionVersion(ctx, f.org.ID)
		if err != nil {
			t.Fatal(err)
		}
		g := &models.DeviceGroup{OrgID: f.org.ID, Name: " Laptops ", Description: "all laptops"}
		if err := dg.Create(ctx, g, []int64{d1.ID, d1.ID}); err != nil {
			t.Fatal(err)
		}
		if g.Name != "Laptops" || g.MembersCount != 1 {
			t.Fatalf("created %+v", g)
		}
		if v1, _ := dg.ProtectionVersion(ctx, f.org.ID); v1 <= v0 {
			t.Fatalf("version %d after %d", v1, v0)
		}
		// Names are unique ignoring case; a device of another organization
		// is no member candidate; another organization does not see the group.
		if err := dg.Create(ctx, &models.DeviceGroup{OrgID: f.org.ID, Name: "LAPTOPS"}, nil); models.ErrorCode(err) != models.ECONFLICT {
			t.Fatalf("duplicate name: %v", err)
		}
		if err := dg.Create(ctx, &models.DeviceGroup{OrgID: f.org.ID, Name: "x"}, []int64{foreign.ID}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("foreign device: %v", err)
		}
		if _, err := dg.Get(ctx, other.org.ID, g.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("other org get: %v", err)
		}
		if _, err := dg.AddMembers(ctx, other.org.ID, g.ID, []int64{foreign.ID}); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("other org add: %v", err)
		}
		got, err := dg.AddMembers(ctx, f.org.ID, g.ID, []int64{d2.ID, d1.ID})
		if err != nil || got.MembersCount != 2 {
			t.Fatalf("add: %+v %v", got, err)
		}
		groups, err := dg.GroupsOfDevice(ctx, f.org.ID, d2.ID)
		if err != nil || len(groups) != 1 || groups[0] != g.ID {
			t.Fatalf("groups of device: %v %v", groups, err)
		}
		if groups, _ := dg.GroupsOfDevice(ctx, other.org.ID, d2.ID); len(groups) != 0 {
			t.Fatalf("groups of device seen by another org: %v", groups)
		}
		miss, err := dg.MissingGroups(ctx, f.org.ID, []int64{g.ID, 42})
		if err != nil || len(miss) != 1 || miss[0] != 42 {
			t.Fatalf("missing groups: %v %v", miss, err)
		}
		if miss, _ := dg.MissingGroups(ctx, other.org.ID, []int64{g.ID}); len(miss) != 1 {
			t.Fatalf("missing groups of another org: %v", miss)
		}
		miss, err = dg.MissingDevices(ctx, f.org.ID, []int64{d1.ID, foreign.ID})
		if err != nil || len(miss) != 1 || miss[0] != foreign.ID {
			t.Fatalf("missing devices: %v %v", miss, err)
		}

		params := func(q string) listing.Params {
			v, _ := url.ParseQuery(q)
			p, err := listing.Parse(v, models.DeviceGroupMemberListing)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		members, meta, err := dg.Members(ctx, f.org.ID, g.ID, params("limit=1"))
		if err != nil || len(members) != 1 || members[0].Name != "PC1" || meta.(*listing.OffsetMeta).Total != 2 {
			t.Fatalf("members: %+v %+v %v", members, meta, err)
		}
		// A deleted device leaves the counts and lists.
		if _, err := f.dev.Delete(ctx, f.org.ID, d1.ID); err != nil {
			t.Fatal(err)
		}
		if got, _ := dg.Get(ctx, f.org.ID, g.ID); got.MembersCount != 1 {
			t.Fatalf("count after device delete: %d", got.MembersCount)
		}
		got, err = dg.RemoveMembers(ctx, f.org.ID, g.ID, []int64{d2.ID, 7})
		if err != nil || got.MembersCount != 0 {
			t.Fatalf("remove: %+v %v", got, err)
		}
		name := "Desktops"
		if got, err = dg.Update(ctx, f.org.ID, g.ID, models.DeviceGroupChange{Name: &name}); err != nil || got.Name != "Desktops" || got.Description != "all laptops" {
			t.Fatalf("update: %+v %v", got, err)
		}
		lp, _ := listing.Parse(url.Values{"filter": {`name eq "Desktops"`}}, models.DeviceGroupListing)
		list, _, err := dg.List(ctx, f.org.ID, lp)
		if err != nil || len(list) != 1 {
			t.Fatalf("list: %+v %v", list, err)
		}
		if err := dg.Delete(ctx, f.org.ID, g.ID); err != nil {
			t.Fatal(err)
		}
		if err := dg.Delete(ctx, f.org.ID, g.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("second delete: %v", err)
		}
	})
}
