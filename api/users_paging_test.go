package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
)

// TestUsers_CursorPagingUnderConcurrentWrites pages through GET /users
// while writers create and delete users, and checks the cursor guarantee:
// every user that existed before the first page and still exists after the
// last is seen exactly once, and no user is seen twice.
func TestUsers_CursorPagingUnderConcurrentWrites(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		ctx := t.Context()
		depts := []string{"Sales", "IT", "HR", "Ops"}
		var originals []int64
		for i := range 300 {
			u := &identity.User{OrgID: env.Org.ID, Email: fmt.Sprintf("o%d@example.com", i), LastName: fmt.Sprintf("L%03d", rand.IntN(1000)), //nolint:gosec // G404: test data, not a secret
				Department: depts[i%4], Status: identity.UserActive, IsLicensed: true}
			if err := env.Store.Users.Create(ctx, u, ""); err != nil {
				t.Fatal(err)
			}
			originals = append(originals, u.ID)
		}
		tok := env.Token(env.Org, "svc.user.READ")
		for _, sort := range []string{"", "-lastName", "department,-id", "-department,lastName"} {
			t.Run("sort="+sort, func(t *testing.T) {
				wctx, stop := context.WithCancel(ctx)
				var mu sync.Mutex
				deleted := map[int64]bool{}
				var wg sync.WaitGroup
				for w := range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := rand.New(rand.NewPCG(uint64(w), 1)) //nolint:gosec // G404: a reproducible test load
						for n := 0; wctx.Err() == nil; n++ {
							time.Sleep(time.Millisecond)
							if r.IntN(3) != 0 {
								u := &identity.User{OrgID: env.Org.ID, Email: fmt.Sprintf("w%d-%d-%d@example.com", w, n, r.Int()),
									LastName: fmt.Sprintf("L%03d", r.IntN(1000)), Department: depts[r.IntN(4)], Status: 1}
								_ = env.Store.Users.Create(context.Background(), u, "")
								continue
							}
							victim := originals[r.IntN(len(originals))]
							if err := env.Store.Users.Delete(context.Background(), env.Org.ID, victim); err == nil {
								mu.Lock()
								deleted[victim] = true
								mu.Unlock()
							}
						}
					}()
				}
				seen := map[string]int{}
				q := url.Values{"limit": {"9"}, "fields": {"id"}}
				if sort != "" {
					q.Set("sort", sort)
				}
				for pages := 0; ; pages++ {
					if pages > 500 {
						t.Fatal("paging does not end")
					}
					var list userList
					resp := env.Get("/api/v1/users?"+q.Encode(), tok)
					if resp.Status != 200 {
						t.Fatalf("page %d: %d %s", pages, resp.Status, resp.Body)
					}
					resp.JSON(t, &list)
					for _, item := range list.Data {
						seen[item["id"].(string)]++
					}
					if list.Meta.IsLast {
						break
					}
					q.Set("cursor", *list.Meta.NextCursor)
				}
				stop()
				wg.Wait()
				for id, n := range seen {
					if n > 1 {
						t.Errorf("user %s seen %d times", id, n)
					}
				}
				kept := 0
				for _, id := range originals {
					if deleted[id] {
						continue
					}
					kept++
					if seen[models.FormatID(id)] != 1 {
						t.Errorf("user %d existed throughout but was seen %d times", id, seen[models.FormatID(id)])
					}
				}
				t.Logf("%d originals kept, %d deleted, %d rows seen", kept, len(deleted), len(seen))
				// Next round starts from the users still there.
				var live []int64
				for _, id := range originals {
					if !deleted[id] {
						live = append(live, id)
					}
				}
				originals = live
			})
		}
	})
}
