package decide_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"iam/models/decide"
	"iam/models/protection"
)

// benchSet is cmd/decidebench's organization without a database: 1,000
// policies besides the default one, each with an IP source config of 10
// entries (8 IPv4 /28 prefixes, 2 IPv6 ranges) and a business hours config,
// targeting one of 20 groups.
func benchSet() *protection.PolicySet {
	set := &protection.PolicySet{Configs: map[int64]*protection.ConditionConfig{}}
	for i := 0; i < 10; i++ {
		id := int64(100000 + i)
		set.Configs[id] = &protection.ConditionConfig{ID: id, Family: protection.FamilyBusinessHours, DisplayName: fmt.Sprintf("Hours %d", i),
			Timezone: []string{"UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo"}[i%4], BusinessHoursBitmap: strings.Repeat("1", protection.BusinessHoursBits)}
	}
	for i := 0; i < 1000; i++ {
		var items []string
		for k := 0; k < 8; k++ {
			items = append(items, netip.PrefixFrom(benchAddr(i, k), 28).Masked().String())
		}
		v6 := func(k int) string { return fmt.Sprintf("2001:db8:%x::%x", i, k) }
		id := int64(1000 + i)
		set.Configs[id] = &protection.ConditionConfig{ID: id, Family: protection.FamilyIPSources, DisplayName: fmt.Sprintf("Source %d", i),
			IPAddresses: strings.Join(items, ","), IPAddressRanges: []protection.IPRange{{From: v6(0x10), To: v6(0x1f)}, {From: v6(0x100), To: v6(0x1ff)}}}
		set.Policies = append(set.Policies, protection.Policy{ID: int64(i + 1), Name: fmt.Sprintf("Policy %d", i), IsEnabled: true, Priority: int64(i + 1),
			AccessType: []string{protection.AccessAllow, protection.AccessDeny}[i%2], GroupIDs: []int64{int64(i % 20)},
			EndpointsSettings: []protection.EndpointSetting{{Endpoint: protection.EndpointNPS, Type: protection.EndpointTypeNPSVPN}},
			Conditions: []protection.PolicyCondition{
				{SequenceNumber: 1, FactorType: protection.FactorTypeIPAddress, Comparator: protection.ComparatorIn, FactorConfigs: []protection.RefID{protection.RefID(id)}},
				{SequenceNumber: 2, FactorType: protection.FactorTypeTime, Comparator: protection.ComparatorIn, FactorConfigs: []protection.RefID{protection.RefID(100000 + i%10)}},
			},
			CriteriaExpression: "1 and 2"})
	}
	set.Policies = append(set.Policies, protection.Policy{ID: 5000, Name: "Default", IsEnabled: true, IsDefault: true, Priority: 1001, AccessType: protection.AccessAllow,
		EndpointsSettings: []protection.EndpointSetting{{Endpoint: protection.EndpointNPS, Type: protection.EndpointTypeNPSVPN}}})
	return set
}

func benchAddr(i, k int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), byte(16*k + 1)}) //nolint:gosec // i < 1000 is split into its two bytes; k < 8 gives at most 113
}

// benchRequests: the address of a random policy's source, or one in ten
// from no source; the user is in every group (every policy reaches them).
func benchRequests(n int) []decide.Request {
	r := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // a seeded, repeatable workload, not a secret
	all := make([]int64, 20)
	for i := range all {
		all[i] = int64(i)
	}
	now := time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC)
	out := make([]decide.Request, n)
	for i := range out {
		ip := benchAddr(r.IntN(1000), r.IntN(8)).Next()
		if r.IntN(10) == 0 {
			ip = netip.AddrFrom4([4]byte{172, 16, byte(r.IntN(256)), byte(r.IntN(256))}) //nolint:gosec // IntN(256) is below 256: each fits a byte
		}
		out[i] = decide.Request{UserID: 7, UserGroups: all, Endpoint: protection.EndpointNPS, IP: ip, Time: now}
	}
	return out
}

// BenchmarkDecide_WorstCase: a user every one of the 1,000 policies reaches.
func BenchmarkDecide_WorstCase(b *testing.B) {
	snap := decide.Compile(1, 1, benchSet())
	reqs := benchRequests(1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d := decide.Decide(snap, reqs[i%len(reqs)], nil)
		if d.Policy == nil {
			b.Fatal("no policy")
		}
		i++
	}
}

// BenchmarkDecide_WorstCaseJSON: the same, with the answer written.
func BenchmarkDecide_WorstCaseJSON(b *testing.B) {
	snap := decide.Compile(1, 1, benchSet())
	reqs := benchRequests(1024)
	b.ReportAllocs()
	i := 0
	buf := make([]byte, 0, 1<<16)
	for b.Loop() {
		d := decide.Decide(snap, reqs[i%len(reqs)], nil)
		var err error
		if buf, err = d.AppendJSON(buf[:0]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
