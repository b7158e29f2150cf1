package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/protection"
)

type decisionBody struct {
	Data struct {
		Decision string `json:"decision"`
		Policy   *struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"policy"`
		Evaluated []struct {
			PolicyID string   `json:"policy_id"`
			Matched  bool     `json:"matched"`
			Reasons  []string `json:"reasons"`
		} `json:"evaluated"`
	} `json:"data"`
}

// TestDecisions_EvaluateAndAuthorize: a deny policy reaching a user only
// through a dynamic group, and a device only through a device group,
// decides both the admin's evaluate and the agent's authorize; a policy
// change reaches the next decision (the snapshot cache follows the
// protection version).
func TestDecisions_EvaluateAndAuthorize(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		ctx := t.Context()
		tok := env.Token(env.Org, "svc.conditional_access_policy.READ")

		// The dynamic group exists first: the user's creation makes them a member.
		dyn := &identity.Group{OrgID: env.Org.ID, Name: "Sales", IsDynamic: true, MembershipRule: `department eq "Sales"`}
		if err := env.Store.Groups.Create(ctx, dyn, nil, &jobs.Job{Kind: "GroupRecompute", Module: "Identity", ActionName: "Recompute group members"}); err != nil {
			t.Fatal(err)
		}
		seller := &identity.User{OrgID: env.Org.ID, Email: "seller@example.com", Department: "Sales", Status: identity.UserActive}
		other := &identity.User{OrgID: env.Org.ID, Email: "other@example.com", Department: "IT", Status: identity.UserActive}
		for _, u := range []*identity.User{seller, other} {
			if err := env.Store.Users.Create(ctx, u, ""); err != nil {
				t.Fatal(err)
			}
		}
		key, err := env.Store.Devices.InstallKey(ctx, env.Org.ID, devices.AgentDevice)
		if err != nil {
			t.Fatal(err)
		}
		lab := registerAgent(t, env, key, agentFacts("LAB1", "L1"))
		desk := registerAgent(t, env, key, agentFacts("DESK1", "D1"))
		dg := &protection.DeviceGroup{OrgID: env.Org.ID, Name: "Lab"}
		labID, _ := models.ParseID("id", lab.id)
		if err := env.Store.DeviceGroups.Create(ctx, dg, []int64{labID}); err != nil {
			t.Fatal(err)
		}
		office := &protection.ConditionConfig{OrgID: env.Org.ID, Family: protection.FamilyIPSources, DisplayName: "Office", IPAddresses: "192.0.2.0/24"}
		if err := env.Store.ConditionConfigs.Create(ctx, office); err != nil {
			t.Fatal(err)
		}
		p := &protection.Policy{OrgID: env.Org.ID, Name: "Lab outside office", IsEnabled: true, AccessType: protection.AccessDeny,
			GroupIDs: []int64{dyn.ID},
			EndpointsSettings: []protection.EndpointSetting{{Endpoint: protection.EndpointComputerDevices, Type: protection.EndpointTypeComputerDevices,
				Actions: []string{"RDP"}, DeviceAssignment: &protection.DeviceAssignment{GroupIDs: []protection.RefID{protection.RefID(dg.ID)}}}},
			Conditions:         []protection.PolicyCondition{{SequenceNumber: 1, FactorType: "ipaddress", Comparator: "not_in", FactorConfigs: []protection.RefID{protection.RefID(office.ID)}}},
			CriteriaExpression: "1",
		}
		if err := env.Store.Policies.Create(ctx, p, protection.PolicyActor{}); err != nil {
			t.Fatal(err)
		}

		evaluate := func(body map[string]any) decisionBody {
			t.Helper()
			resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/conditional-access-policies/evaluate", Token: tok, Body: body})
			if resp.Status != http.StatusOK {
				t.Fatalf("evaluate %v: %d %s", body, resp.Status, resp.Body)
			}
			var out decisionBody
			resp.JSON(t, &out)
			return out
		}
		sellerID, otherID := models.FormatID(seller.ID), models.FormatID(other.ID)
		d := evaluate(map[string]any{"user_id": sellerID, "device_id": lab.id, "endpoint": "ComputerDevices", "action": "RDP", "ip": "198.51.100.7"})
		if d.Data.Decision != "deny" || d.Data.Policy == nil || d.Data.Policy.Name != "Lab outside office" {
			t.Fatalf("seller on the lab device from outside: %+v", d.Data)
		}
		why := strings.Join(d.Data.Evaluated[0].Reasons, "\n")
		if !strings.Contains(why, "through group "+models.FormatID(dyn.ID)) || !strings.Contains(why, "through device group "+models.FormatID(dg.ID)) ||
			!strings.Contains(why, `198.51.100.7 is in none of the IP sources "Office"`) {
			t.Errorf("reasons %s", why)
		}
		for name, body := range map[string]map[string]any{
			"from the office":        {"user_id": sellerID, "device_id": lab.id, "endpoint": "ComputerDevices", "action": "RDP", "ip": "192.0.2.9"},
			"not in the group":       {"user_id": otherID, "device_id": lab.id, "endpoint": "ComputerDevices", "action": "RDP", "ip": "198.51.100.7"},
			"device outside the lab": {"user_id": sellerID, "device_id": desk.id, "endpoint": "ComputerDevices", "action": "RDP", "ip": "198.51.100.7"},
		} {
			if d := evaluate(body); d.Data.Decision != "allow" || d.Data.Policy == nil || d.Data.Policy.Name != protection.DefaultPolicyName {
				t.Errorf("%s: %+v", name, d.Data)
			}
		}

		// The agent on the lab device asks at logon, naming the user by email.
		resp := env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/authorize", Body: map[string]any{"user_name": "seller@example.com", "action": "RDP", "ip": "198.51.100.7"},
			Header: http.Header{"Authorization": {"Device " + lab.id + ":" + lab.secret}}})
		var ad decisionBody
		resp.JSON(t, &ad)
		if resp.Status != 200 || ad.Data.Decision != "deny" {
			t.Fatalf("authorize: %d %s", resp.Status, resp.Body)
		}
		resp = env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/authorize", Body: map[string]any{"user_id": sellerID, "action": "RDP", "ip": "198.51.100.7"},
			Header: http.Header{"Authorization": {"Device " + desk.id + ":" + desk.secret}}})
		resp.JSON(t, &ad)
		if resp.Status != 200 || ad.Data.Decision != "allow" {
			t.Fatalf("authorize on the desk: %d %s", resp.Status, resp.Body)
		}
		if resp := env.Do(apitest.Request{Method: "POST", Path: "/agent/v1/authorize", Body: map[string]any{"user_id": sellerID, "action": "RDP", "ip": "1.2.3.4"},
			Header: http.Header{"Authorization": {"Device " + lab.id + ":wrong"}}}); resp.Status != 401 {
			t.Errorf("wrong credential: %d", resp.Status)
		}

		// Disabling the policy reaches the next decision.
		if _, err := env.Store.Policies.Update(ctx, env.Org.ID, p.ID, protection.PolicyActor{}, func(cur *protection.Policy) (*protection.Policy, error) {
			cur.IsEnabled = false
			return cur, nil
		}); err != nil {
			t.Fatal(err)
		}
		if d := evaluate(map[string]any{"user_id": sellerID, "device_id": lab.id, "endpoint": "ComputerDevices", "action": "RDP", "ip": "198.51.100.7"}); d.Data.Decision != "allow" {
			t.Errorf("after disabling: %+v", d.Data)
		}

		// Bad input and another organization's ids.
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/conditional-access-policies/evaluate", Token: tok,
			Body: map[string]any{"user_id": sellerID, "endpoint": "NPS", "ip": "not-an-ip"}}), 400, "00000109", "ip")
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/conditional-access-policies/evaluate", Token: tok,
			Body: map[string]any{"user_id": sellerID, "endpoint": "Mainframe", "ip": "10.0.0.1"}}), 400, "00000109", "endpoint")
		if e := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/conditional-access-policies/evaluate", Token: tok,
			Body: map[string]any{"user_id": sellerID, "device_id": "999999", "endpoint": "ComputerDevices", "action": "RDP", "ip": "10.0.0.1"}}); e.Status != 404 || e.ErrorBody(t).Title != "Device Not Found" {
			t.Errorf("unknown device: %d %s", e.Status, e.Body)
		}
		otherOrg := env.NewOrg("Other")
		wantError(t, env.Do(apitest.Request{Method: "POST", Path: "/api/v1/protection/conditional-access-policies/evaluate",
			Token: env.Token(otherOrg, "svc.conditional_access_policy.ALL"),
			Body:  map[string]any{"user_id": sellerID, "endpoint": "NPS", "ip": "10.0.0.1"}}), 404, "00000103", "")
	})
}
