package scim_test

import (
	"context"
	"strings"
	"testing"

	"github.com/uptrace/bun/dialect"

	"iam/models/dbtest"
	"iam/models/scim"
	"iam/models/store"
)

// TestStore_UserLookupsUseTheirIndexes: on PostgreSQL, userName eq and
// externalId eq are planned on their indexes (users_org_user_name,
// users_org_external_id), which is what keeps a provisioning engine's
// lookups fast at a million users.
func TestStore_UserLookupsUseTheirIndexes(t *testing.T) {
	db := dbtest.Postgres(t)
	if db.Dialect().Name() != dialect.PG {
		t.Skip("PostgreSQL only")
	}
	st := store.NewStore(db)
	for filter, index := range map[string]string{
		`userName eq "Ann@Example.com"`: "users_org_user_name",
		`externalId eq "00u1"`:          "users_org_external_id",
	} {
		q, err := st.SCIM.UserListQuery(1, scim.Query{Filter: filterOf(t, filter)})
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(context.Background(), "SET LOCAL enable_seqscan = off"); err != nil {
			t.Fatal(err)
		}
		var plan []string
		if err := tx.NewRaw("EXPLAIN "+q.String()).Scan(context.Background(), &plan); err != nil {
			t.Fatal(err)
		}
		_ = tx.Rollback()
		if !strings.Contains(strings.Join(plan, "\n"), index) {
			t.Errorf("%s is not planned on %s:\n%s", filter, index, strings.Join(plan, "\n"))
		}
	}
}
