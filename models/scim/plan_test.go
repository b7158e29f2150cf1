package scim_test

import (
	"context"
	"strings"
	"testing"

	"github.com/uptrace/bun/dialect"

	"iam/models/dbtest"
	"iam/models/modeltest"
	"iam/models/scim"
	"iam/models/store"
)

// TestStore_UserLookupsUseTheirIndexes: on PostgreSQL, with 200,000 users
// analyzed, the first page Okta asks for (count=100) of userName eq,
// emails eq and externalId eq is planned on the lookup's index
// (users_org_user_name, users_org_email, users_org_external_id). Without
// the statistics of lower(user_name) and lower(email) (migration
// 20261207000700) the planner guessed that 0.5% of the users match and
// walked the primary key in id order instead, reading every user.
func TestStore_UserLookupsUseTheirIndexes(t *testing.T) {
	if testing.Short() {
		t.Skip("200,000 users: not under -short")
	}
	db := dbtest.Postgres(t)
	if db.Dialect().Name() != dialect.PG {
		t.Skip("PostgreSQL only")
	}
	ctx := context.Background()
	st := store.NewStore(db)
	org := modeltest.NewOrg(t, st)
	_, err := db.ExecContext(ctx, `INSERT INTO users (id, org_id, first_name, last_name, display_name, email, user_name,
		external_id, status, is_licensed, created_at, updated_at)
		SELECT ? + i, ?, 'F', 'L', 'User ' || i, 'user' || i || '@example.com', 'user' || i || '@example.com',
			'ext-' || i, 1, TRUE, now(), now()
		FROM generate_series(1, 200000) AS i`, org.ID*2, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = db.ExecContext(ctx, "ANALYZE users"); err != nil {
		t.Fatal(err)
	}
	for filter, index := range map[string]string{
		`userName eq "User4242@Example.com"`:     "users_org_user_name",
		`emails eq "user4242@example.com"`:       "users_org_email",
		`emails.value eq "USER4242@example.com"`: "users_org_email",
		`externalId eq "ext-4242"`:               "users_org_external_id",
	} {
		q, err := st.SCIM.UserListQuery(org.ID, scim.Query{Filter: filterOf(t, filter), Count: 100})
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		if err = db.NewRaw("EXPLAIN "+q.String()).Scan(ctx, &plan); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(plan, "\n"), index) {
			t.Errorf("%s is not planned on %s:\n%s", filter, index, strings.Join(plan, "\n"))
		}
		users, _, _, err := st.SCIM.ListUsers(ctx, org.ID, scim.Query{Filter: filterOf(t, filter), Count: 100}, false)
		if err != nil || len(users) != 1 || users[0].ExternalID != "ext-4242" {
			t.Errorf("%s: %v %v", filter, users, err)
		}
	}
}
