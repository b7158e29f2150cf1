package identity_test

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/listing"
	"iam/models/modeltest"
	"iam/models/sqldb"
	modelstore "iam/models/store"
)

// TestUserListColumns checks that lists read every column of User but the
// sign-in ones, so that a column added to User is not left out of lists.
func TestUserListColumns(t *testing.T) {
	db := dbtest.SQLite(t)
	var want []string
	for _, f := range db.Table(reflect.TypeFor[identity.User]()).Fields {
		if !slices.Contains(identity.SignInColumns, f.Name) {
			want = append(want, f.Name)
		}
	}
	if !slices.Equal(identity.UserListColumns, want) {
		t.Errorf("list columns\n %v\nwant (User's columns without the sign-in ones)\n %v", identity.UserListColumns, want)
	}
}

// TestUserStore_ListScansLikeBun compares the users of List and
// ListGroupMembers, read by their own scanner, with the same rows read by
// bun, on every kind of value: NULL and set managers and primary sources,
// awkward text, booleans and statuses both ways.
func TestUserStore_ListScansLikeBun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := modelstore.NewStore(db)
		org := modeltest.NewOrg(t, store)
		users := modelstore.NewStore(db).Users
		var ids []int64
		texts := []string{"plain", "quote \" back \\ slash", "ünïcödé ✓ 😀", "<tag> & co", "tab\tnew\nline"}
		for i := range 12 {
			u := identity.User{Email: fmt.Sprintf("u%d@example.com", i), FirstName: texts[i%len(texts)],
				LastName: texts[(i+1)%len(texts)], Description: texts[(i+2)%len(texts)], Department: "Sales",
				City: "Köln", Country: "DE", Gender: "F", Language: "de-DE", IsLicensed: i%3 != 0, Status: 1 - i%2}
			if i > 0 && i%4 == 0 {
				u.ManagerID = &ids[i-1]
			}
			ids = append(ids, modeltest.AddUser(t, users, org.ID, u).ID)
		}
		src := &identity.PrimarySource{ID: "ad-1", ApplicationName: "AD", IsEnabled: true,
			ApplicationService: identity.ApplicationService{ID: "ad", Name: "Active Directory", ServiceName: "AD", Logo: "x"},
			CreationTime:       time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC), ModifiedTime: time.Date(2025, 2, 3, 4, 5, 6, 0, time.UTC)}
		if _, err := db.NewUpdate().Model((*identity.User)(nil)).Set("primary_source = ?", src).Set("is_domain_verified = ?", true).
			Where("id IN (?)", bun.List(ids[3:6])).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		group := &identity.Group{OrgID: org.ID, Name: "all"}
		if err := store.Groups.Create(ctx, group, ids, nil); err != nil {
			t.Fatal(err)
		}

		var want []identity.User
		if err := db.NewSelect().Model(&want).ExcludeColumn(identity.SignInColumns...).
			Where("org_id = ?", org.ID).Order("id").Scan(ctx); err != nil {
			t.Fatal(err)
		}
		if want[3].PrimarySource == nil || want[4].ManagerID == nil {
			t.Fatal("the rows read by bun miss the values set")
		}
		for _, limit := range []string{"5", "100"} {
			check := func(name string, list func(p listing.Params) ([]identity.User, listing.Meta, error)) {
				var got []identity.User
				q := url.Values{"limit": {limit}}
				for {
					p, err := listing.Parse(q, identity.UserListing)
					if err != nil {
						t.Fatal(err)
					}
					page, meta, err := list(p)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					got = append(got, page...)
					m := meta.(*listing.CursorMeta)
					if m.IsLast {
						break
					}
					q.Set("cursor", *m.NextCursor)
				}
				if len(got) != len(want) {
					t.Fatalf("%s, limit %s: %d users, want %d", name, limit, len(got), len(want))
				}
				for i := range want {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Errorf("%s, limit %s: user %d\n got %+v\nwant %+v", name, limit, i, got[i], want[i])
					}
				}
			}
			check("List", func(p listing.Params) ([]identity.User, listing.Meta, error) {
				return users.List(ctx, org.ID, identity.LicensingBoth, p)
			})
			check("ListGroupMembers", func(p listing.Params) ([]identity.User, listing.Meta, error) {
				return users.ListGroupMembers(ctx, org.ID, group.ID, p)
			})
			// A recycled slice full of other users leaves nothing of them.
			junk := make([]identity.User, 3, 200)
			dirty := func() {
				full := junk[:cap(junk)]
				for i := range full {
					full[i] = want[4]
					full[i].PrimarySource, full[i].Role, full[i].PasswordHash = src, identity.RoleAdmin, "x"
				}
			}
			dirty()
			check("ListInto", func(p listing.Params) ([]identity.User, listing.Meta, error) {
				page, meta, err := users.ListInto(ctx, junk, org.ID, identity.LicensingBoth, p)
				if err == nil && len(page) > 0 && &page[0] != &junk[0] {
					t.Error("ListInto did not read into the slice it was given")
				}
				page = slices.Clone(page)
				dirty()
				return page, meta, err
			})
		}
	})
}

// BenchmarkUserStore_List pages through 10,000 users of an organization
// on PostgreSQL, 100 a page, as GET /users does: "scanner" through List,
// "bun" through the same statements scanned by bun into the same structs.
func BenchmarkUserStore_List(b *testing.B) {
	db := dbtest.Postgres(b)
	ctx := b.Context()
	store := modelstore.NewStore(db)
	org := &identity.Organization{Name: "bench"}
	if err := store.Orgs.Create(ctx, org); err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	for chunk := range 10 {
		batch := make([]identity.User, 1000)
		for i := range batch {
			n := chunk*1000 + i
			batch[i] = identity.User{ID: sqldb.NewID(), OrgID: org.ID, FirstName: fmt.Sprintf("First%d", n),
				LastName: fmt.Sprintf("Last%d", n), DisplayName: fmt.Sprintf("First%d Last%d", n, n),
				Email: fmt.Sprintf("user%05d@example.com", n), EmployeeID: fmt.Sprintf("E%05d", n),
				Department: "Dept", Title: "Engineer", Country: "DE", Status: 1, IsLicensed: true,
				Role: identity.RoleUser, CreatedAt: now, UpdatedAt: now}
		}
		if _, err := db.NewInsert().Model(&batch).Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, "VACUUM ANALYZE users"); err != nil {
		b.Fatal(err)
	}
	users := modelstore.NewStore(db).Users
	run := func(b *testing.B, list func(p listing.Params) (listing.Meta, error)) {
		q := url.Values{"limit": {"100"}}
		b.ReportAllocs()
		cpu0 := processCPU()
		defer func() { b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op") }()
		for b.Loop() {
			p, err := listing.Parse(q, identity.UserListing)
			if err != nil {
				b.Fatal(err)
			}
			meta, err := list(p)
			if err != nil {
				b.Fatal(err)
			}
			if m := meta.(*listing.CursorMeta); m.NextCursor != nil {
				q.Set("cursor", *m.NextCursor)
			} else {
				q.Del("cursor")
			}
		}
	}
	b.Run("scanner", func(b *testing.B) {
		run(b, func(p listing.Params) (listing.Meta, error) {
			_, meta, err := users.List(ctx, org.ID, identity.LicensingBoth, p)
			return meta, err
		})
	})
	b.Run("bun", func(b *testing.B) {
		count := func(ctx context.Context) (int64, error) {
			var n int64
			err := db.NewSelect().Table("user_counts").ColumnExpr("SUM(users)").Where("org_id = ?", org.ID).Scan(ctx, &n)
			return n, err
		}
		run(b, func(p listing.Params) (listing.Meta, error) {
			page := []identity.User{}
			q := db.NewSelect().Model(&page).ExcludeColumn(identity.SignInColumns...).Where("org_id = ?", org.ID)
			return listing.FetchCounted(ctx, q, &page, identity.UserListing, p, count)
		})
	})
}

// TestUserCounts_ConcurrentWritersSumToTheUsers checks the totals a list
// without a filter reads from user_counts (rows kept by triggers, one per
// writing connection's shard on PostgreSQL) against the users themselves,
// after creates, licensing changes and deletes made by several connections
// at once.
func TestUserCounts_ConcurrentWritersSumToTheUsers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := modelstore.NewStore(db)
		org := modeltest.NewOrg(t, store)
		other := modeltest.NewOrg(t, store)
		const writers, each = 6, 15
		errs := make(chan error, writers)
		for w := range writers {
			go func() {
				errs <- func() error {
					var mine []int64
					for i := range each {
						orgID := org.ID
						if i%5 == 4 {
							orgID = other.ID
						}
						u := identity.User{OrgID: orgID, Email: fmt.Sprintf("w%d-%d@example.com", w, i), FirstName: "W",
							Status: identity.UserActive, IsLicensed: i%2 == 0}
						if err := store.Users.Create(ctx, &u, ""); err != nil {
							return err
						}
						if orgID == org.ID {
							mine = append(mine, u.ID)
						}
					}
					if _, err := db.NewUpdate().Table("users").Set("is_licensed = NOT is_licensed").
						Where("id IN (?)", bun.List(mine[:4])).Exec(ctx); err != nil {
						return err
					}
					_, err := store.Users.DeleteMany(ctx, org.ID, mine[len(mine)-3:])
					return err
				}()
			}()
		}
		for range writers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range []int64{org.ID, other.ID} {
			for licensing, where := range map[identity.Licensing]string{identity.LicensingBoth: "TRUE",
				identity.Licensed: "is_licensed", identity.Unlicensed: "NOT is_licensed"} {
				want, err := db.NewSelect().Table("users").Where("org_id = ?", o).Where(where).Count(ctx)
				if err != nil {
					t.Fatal(err)
				}
				p, err := listing.Parse(url.Values{"limit": {"1"}}, identity.UserListing)
				if err != nil {
					t.Fatal(err)
				}
				_, meta, err := store.Users.List(ctx, o, licensing, p)
				if err != nil {
					t.Fatal(err)
				}
				if got := meta.(*listing.CursorMeta).Total; got != int64(want) {
					t.Errorf("org %d, licensing %v: total %d, want %d users", o, licensing, got, want)
				}
			}
		}
	})
}
