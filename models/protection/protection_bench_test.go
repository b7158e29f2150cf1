package protection_test

import (
	"context"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/protection"
	"iam/models/store"
)

// BenchmarkLoadEnabledPolicies reads one organization's decision snapshot:
// 1000 policies of 10 conditions, each naming one of 100 IP source configs
// (10,000 condition entries). It is what a decision cache fill costs.
//
//	go test ./models -run XXX -bench LoadEnabledPolicies -benchtime 20x
func BenchmarkLoadEnabledPolicies(b *testing.B) {
	for _, d := range []struct {
		name string
		open func(testing.TB) *bun.DB
	}{{"sqlite", dbtest.SQLite}, {"postgres", dbtest.Postgres}} {
		b.Run(d.name, func(b *testing.B) {
			ctx := context.Background()
			store := store.NewStore(d.open(b))
			org := &identity.Organization{Name: "Bench"}
			if err := store.Orgs.Create(ctx, org); err != nil {
				b.Fatal(err)
			}
			var configs []protection.RefID
			for i := range 100 {
				c := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: "C" + itoa(i), IPAddresses: "10.0.0." + itoa(i+1)}
				if err := store.ConditionConfigs.Create(ctx, c); err != nil {
					b.Fatal(err)
				}
				configs = append(configs, protection.RefID(c.ID))
			}
			for i := range 1000 {
				p := &protection.Policy{OrgID: org.ID, Name: "P" + itoa(i), IsEnabled: true, AccessType: protection.AccessDeny,
					EndpointsSettings: []protection.EndpointSetting{{Endpoint: protection.EndpointNPS}}}
				var seqs []string
				for j := 1; j <= 10; j++ {
					p.Conditions = append(p.Conditions, protection.PolicyCondition{SequenceNumber: j, FactorType: "ipaddress", Comparator: "in",
						FactorConfigs: []protection.RefID{configs[(i+j)%len(configs)]}})
					seqs = append(seqs, itoa(j))
				}
				p.CriteriaExpression = strings.Join(seqs, " or ")
				if err := store.Policies.Create(ctx, p, protection.PolicyActor{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				set, err := store.Policies.LoadEnabledPolicies(ctx, org.ID)
				if err != nil || len(set.Policies) != 1001 || len(set.Configs) != 100 {
					b.Fatalf("%d policies %d configs %v", len(set.Policies), len(set.Configs), err)
				}
			}
		})
	}
}
