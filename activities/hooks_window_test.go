package activities_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/activities"
	"iam/models/dbtest"
	"iam/models/hooks"
	"iam/models/modeltest"
	"iam/models/secret/secrettest"
	"iam/models/store"
)

// TestDeliverEventHook_SlowRequestHoldsOnlyItsSlot: more deliveries than
// one read of the due list returns, a receiver that holds the first
// request until every other one has arrived: the others go on through the
// remaining slot (a round that waited for its slowest request would hold
// them, and the receiver would give up); each webhook-id arrives once.
func TestDeliverEventHook_SlowRequestHoldsOnlyItsSlot(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		st := store.NewStore(db).SealBlobs(secrettest.Box)
		org := modeltest.NewOrg(t, st)
		st.Hooks.SetURLPolicy(hooks.URLPolicy{AllowHTTP: true})

		const n = 300 // more than one read of the due list (256)
		var (
			mu      sync.Mutex
			seen    = map[string]int{}
			first   string
			release = make(chan struct{})
			gaveUp  bool
		)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("webhook-id")
			mu.Lock()
			seen[id]++
			hold := first == ""
			if hold {
				first = id
			}
			if len(seen) == n {
				close(release)
			}
			mu.Unlock()
			if hold {
				select {
				case <-release:
				case <-time.After(3 * time.Second):
					mu.Lock()
					gaveUp = true
					mu.Unlock()
				}
			}
		}))
		defer srv.Close()

		h := &hooks.Hook{OrgID: org.ID, URL: srv.URL, EventTypes: []string{"user.*"}, Enabled: true}
		if _, err := st.Hooks.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
		for range n {
			if _, err := st.Hooks.Test(ctx, org.ID, h.ID); err != nil {
				t.Fatal(err)
			}
		}
		a := &activities.EventHooks{Store: st, Concurrency: 2, Poll: 10 * time.Millisecond, RunFor: 4 * time.Second,
			Client: activities.NewHookClient([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, 2)}
		run, err := a.DeliverEventHook(t.Context(), h.ID)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if gaveUp {
			t.Fatal("the other deliveries waited for the slow request")
		}
		if len(seen) != n || run.Attempts != n || run.Backlog != 0 {
			t.Fatalf("%d webhook-ids arrived, %d attempts, backlog %d; want %d, %d, 0", len(seen), run.Attempts, run.Backlog, n, n)
		}
		for id, c := range seen {
			if c != 1 {
				t.Fatalf("%s arrived %d times", id, c)
			}
		}
	})
}
