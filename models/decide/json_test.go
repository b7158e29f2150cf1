package decide_test

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"iam/models/decide"
	"iam/models/protection"
)

// TestDecision_JSON: the hand-written JSON reads back like encoding/json's
// view of the same decision, odd characters included.
func TestDecision_JSON(t *testing.T) {
	set := &protection.PolicySet{Policies: []protection.Policy{
		{ID: 1, Name: "Quote \" back\\slash <tag> & \u2028 \x01", IsEnabled: true, AccessType: "deny", UserIDs: []int64{5},
			EndpointsSettings: []protection.EndpointSetting{{Endpoint: "NPS", Type: "NPS_VPN"}},
			Conditions:        []protection.PolicyCondition{{SequenceNumber: 1, FactorType: "ipaddress", Comparator: "in", FactorConfigs: []protection.RefID{9}}}},
		{ID: 2, Name: "Default", IsEnabled: true, IsDefault: true, AccessType: "allow", EndpointsSettings: []protection.EndpointSetting{{Endpoint: "NPS", Type: "NPS_VPN"}}},
	}, Configs: map[int64]*protection.ConditionConfig{9: {ID: 9, Family: protection.FamilyIPSources, DisplayName: "Café \"HQ\"", IPAddresses: "10.0.0.0/8"}}}
	d := decide.Decide(decide.Compile(1, 1, set), decide.Request{UserID: 5, Endpoint: "NPS", IP: netip.MustParseAddr("11.0.0.1"), Time: time.Now()}, nil)
	raw, err := json.Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	if byValue, err := json.Marshal(d); err != nil || string(byValue) != string(raw) {
		t.Errorf("by value %s (%v), by pointer %s", byValue, err, raw)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	type plain struct {
		Decision  string            `json:"decision"`
		Policy    *decide.PolicyRef `json:"policy"`
		Primary   any               `json:"primary_authentication"`
		Secondary any               `json:"secondary_authentication"`
		Adv       any               `json:"advanced_settings"`
		EAdv      any               `json:"endpoint_advanced_settings"`
		Evaluated []map[string]any  `json:"evaluated"`
		NotAssign int               `json:"not_assigned"`
	}
	ev := []map[string]any{}
	for _, e := range d.Evaluated() {
		ev = append(ev, map[string]any{"policy_id": e.PolicyID, "name": e.Name, "priority": e.Priority, "matched": e.Matched, "reasons": e.Reasons.Strings()})
	}
	ref, _ := json.Marshal(plain{d.Decision, d.Policy, d.PrimaryAuthentication, d.SecondaryAuthentication, d.AdvancedSettings, d.EndpointAdvancedSettings, ev, d.NotAssigned})
	var want map[string]any
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hand-written\n%s\nencoding/json\n%s", raw, ref)
	}
}
