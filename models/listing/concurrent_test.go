package listing_test

import (
	"context"
	"math/rand/v2"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/listing"
)

// TestFetch_ConcurrentInsertsAndDeletes pages through a list while another
// goroutine inserts and deletes rows, and checks the cursor guarantee: every
// row that existed before the first page and still exists after the last is
// seen exactly once, and no row is seen twice.
func TestFetch_ConcurrentInsertsAndDeletes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		original := sampleItems(300)
		createItems(t, db, original)
		nextID := int64(20000)
		for i, sort := range []string{"", "-name", "-rank,createdAt", "active,-createdAt,name", "-id"} {
			w := &writer{db: db, r: rand.New(rand.NewPCG(uint64(i), 7)), nextID: nextID, samples: original, inserted: map[int64]bool{}, deleted: map[int64]bool{}} //nolint:gosec // a seeded, repeatable writer schedule, not a secret
			for _, it := range original {
				w.live = append(w.live, it.ID)
			}
			ctx, cancel := context.WithCancel(context.Background())
			tokens := make(chan struct{}, 1024)
			done := make(chan error, 1)
			go func() { done <- w.run(ctx, tokens) }()

			seen := map[int64]int{}
			query := url.Values{"sort": {sort}, "limit": {"7"}}
			granted := int64(0)
			for pages := 0; ; pages++ {
				if pages > 1000 {
					t.Fatal("paging does not end")
				}
				// The writer finishes the writes of the previous page, then
				// makes writesPerPage more while this page is read.
				for w.ops.Load() < granted {
					select {
					case err := <-done:
						t.Fatalf("writer stopped: %v", err)
					default:
						time.Sleep(50 * time.Microsecond)
					}
				}
				for range writesPerPage {
					tokens <- struct{}{}
				}
				granted += writesPerPage
				rows, m := fetch(t, db, itemListing, query)
				for _, row := range rows {
					seen[row.ID]++
				}
				meta := m.(*listing.CursorMeta)
				if meta.IsLast {
					break
				}
				query.Set("cursor", *meta.NextCursor)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("writer: %v", err)
			}
			nextID = w.nextID

			w.mu.Lock()
			for id, n := range seen {
				if n > 1 {
					t.Errorf("sort %q: row %d seen %d times", sort, id, n)
				}
				if !w.inserted[id] && !isOriginal(original, id) {
					t.Errorf("sort %q: row %d seen but never written", sort, id)
				}
			}
			kept := 0
			for _, it := range original {
				if !w.deleted[it.ID] {
					kept++
					if seen[it.ID] != 1 {
						t.Errorf("sort %q: row %d, there all along, seen %d times", sort, it.ID, seen[it.ID])
					}
				}
			}
			t.Logf("sort %q: %d writes while paging (%d inserted, %d deleted); %d original rows kept, %d rows seen",
				sort, w.ops.Load(), len(w.inserted), len(w.deleted), kept, len(seen))
			w.mu.Unlock()

			// Put the table back for the next sort.
			if _, err := db.NewTruncateTable().Model((*item)(nil)).Exec(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := db.NewInsert().Model(&original).Exec(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func isOriginal(original []item, id int64) bool {
	for _, it := range original {
		if it.ID == id {
			return true
		}
	}
	return false
}

// writesPerPage is how many rows the writer inserts or deletes per page read.
const writesPerPage = 4

// writer inserts rows with sort values spread over the whole range and
// deletes random live rows, one per token, until stopped.
type writer struct {
	db      *bun.DB
	r       *rand.Rand
	nextID  int64
	samples []item
	live    []int64
	ops     atomic.Int64

	mu       sync.Mutex
	inserted map[int64]bool
	deleted  map[int64]bool
}

func (w *writer) run(ctx context.Context, tokens <-chan struct{}) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tokens:
		}
		if w.r.IntN(2) == 0 || len(w.live) == 0 {
			// A copy of a sample row: its sort values tie with existing rows.
			it := w.samples[w.r.IntN(len(w.samples))]
			it.ID = w.nextID
			w.nextID++
			w.mu.Lock()
			w.inserted[it.ID] = true
			w.mu.Unlock()
			if _, err := w.db.NewInsert().Model(&it).Exec(context.Background()); err != nil {
				return err
			}
			w.live = append(w.live, it.ID)
		} else {
			k := w.r.IntN(len(w.live))
			id := w.live[k]
			w.live = append(w.live[:k], w.live[k+1:]...)
			if _, err := w.db.NewDelete().Model((*item)(nil)).Where("id = ?", id).Exec(context.Background()); err != nil {
				return err
			}
			w.mu.Lock()
			w.deleted[id] = true
			w.mu.Unlock()
		}
		w.ops.Add(1)
	}
}
