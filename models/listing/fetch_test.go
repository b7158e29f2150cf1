package listing_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/listing"
)

func TestFetch_Filters(t *testing.T) {
	items := sampleItems(120)
	filters := []string{
		`name eq "alice"`, `name ne "alice"`, `name gt "a"`, `name le "Bob"`,
		`name co "ALI"`, `name co "é"`, `name co "É"`, `name sw "a"`, `name ew "E"`,
		`name co "%"`, `name co "_"`, `name co "\\"`, `name co "'"`, `name co "?"`, `name eq ""`,
		`name pr`, `not (name pr)`, `note pr`, `note eq null`, `note ne null`, `not (note co "a")`,
		`score eq null`, `score ne null`, `score gt 3`, `not (score gt 3)`, `score pr and rank lt 0`,
		`rank ge 0 and active eq true`, `rank eq -2 or owner.name sw "b"`, `active ne true`,
		`createdAt gt "2024-01-01T00:00:05Z"`, `createdAt le "2024-01-01T01:00:03.703701+01:00"`,
		`id eq "1"`, `id gt 5000`, `not (id lt "5000") and not (note co "e" or score eq null)`,
	}
	r := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // a seeded, repeatable set of filters, not a secret
	for range 150 {
		filters = append(filters, randomFilter(r, items, 3))
	}
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		createItems(t, db, items)
		for _, f := range filters {
			got, meta := fetch(t, db, itemListing, url.Values{"filter": {f}, "limit": {"500"}})
			e, _ := listing.ParseFilter(f)
			var want []int64
			for _, it := range items {
				if matches(t, e, it) {
					want = append(want, it.ID)
				}
			}
			gotIDs := ids(got)
			slices.Sort(gotIDs)
			slices.Sort(want)
			if !slices.Equal(gotIDs, want) {
				t.Errorf("filter %s: got %d rows %v, want %d rows %v", f, len(gotIDs), gotIDs, len(want), want)
			}
			if m := meta.(*listing.CursorMeta); m.Total != int64(len(want)) || !m.IsLast || m.NextCursor != nil {
				t.Errorf("filter %s: meta %+v, want total %d on one page", f, m, len(want))
			}
		}
	})
}

// randomFilter writes a random filter over the item schema with literals
// drawn from the data, so that many of them match something.
func randomFilter(r *rand.Rand, items []item, depth int) string {
	if depth > 0 && r.IntN(3) > 0 {
		a, b := randomFilter(r, items, depth-1), randomFilter(r, items, depth-1)
		switch r.IntN(3) {
		case 0:
			return "(" + a + " and " + b + ")"
		case 1:
			return a + " or " + b
		default:
			return "not (" + a + ")"
		}
	}
	it := items[r.IntN(len(items))]
	ops := []string{"eq", "ne", "gt", "ge", "lt", "le"}
	op := ops[r.IntN(len(ops))]
	switch r.IntN(9) {
	case 0, 1:
		attr := []string{"name", "note", "owner.name"}[r.IntN(3)]
		text := sampleNames[r.IntN(len(sampleNames))]
		if r.IntN(2) == 0 {
			op = []string{"co", "sw", "ew"}[r.IntN(3)]
			runes := []rune(text)
			text = string(runes[:r.IntN(len(runes)+1)])
			if r.IntN(2) == 0 {
				text = strings.ToUpper(text)
			}
		}
		return fmt.Sprintf("%s %s %s", attr, op, quote(text))
	case 2:
		return fmt.Sprintf("rank %s %d", op, r.IntN(7)-3)
	case 3:
		return fmt.Sprintf("score %s %d", op, r.IntN(9)-1)
	case 4:
		return fmt.Sprintf("active %s %t", []string{"eq", "ne"}[r.IntN(2)], r.IntN(2) == 0)
	case 5:
		zone := time.FixedZone("z", (r.IntN(5)-2)*3600)
		return fmt.Sprintf("createdAt %s %q", op, it.CreatedAt.In(zone).Format(time.RFC3339Nano))
	case 6:
		if r.IntN(2) == 0 {
			return fmt.Sprintf("id %s %q", op, fmt.Sprint(it.ID))
		}
		return fmt.Sprintf("id %s %d", op, it.ID)
	case 7:
		return []string{"note", "score", "name", "rank"}[r.IntN(4)] + " pr"
	default:
		return fmt.Sprintf("%s %s null", []string{"note", "score", "name"}[r.IntN(3)], []string{"eq", "ne"}[r.IntN(2)])
	}
}

func TestFetch_CursorPaging(t *testing.T) {
	items := sampleItems(120)
	sorts := []string{"", "name", "-name", "-rank,createdAt", "active,-name,rank", "-createdAt,-active", "-id", "rank,id,name"}
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		createItems(t, db, items)
		bytewise := bytewiseStrings(t, db)
		for _, sort := range sorts {
			for _, filter := range []string{"", `note pr or rank gt 0`} {
				query := url.Values{"sort": {sort}, "filter": {filter}}
				query.Set("limit", "500")
				whole, _ := fetch(t, db, itemListing, query)
				if len(whole) == 0 {
					t.Fatalf("sort %q filter %q: no rows", sort, filter)
				}
				if (bytewise || sort != "" && !strings.Contains(sort, "name")) && !slices.IsSortedFunc(whole, orderOf(sort)) {
					t.Errorf("sort %q: rows out of order: %v", sort, ids(whole))
				}
				for _, limit := range []int{1, 7, len(whole) / 2, len(whole), len(whole) + 1} {
					query.Set("limit", fmt.Sprint(limit))
					paged := pageThrough(t, db, query, limit, len(whole))
					if !slices.Equal(ids(paged), ids(whole)) {
						t.Errorf("sort %q filter %q limit %d: pages give\n%v\nwant\n%v", sort, filter, limit, ids(paged), ids(whole))
					}
				}
			}
		}
	})
}

// pageThrough follows next_cursor to the end, checking every page's meta.
func pageThrough(t *testing.T, db bun.IDB, query url.Values, limit, total int) []item {
	t.Helper()
	var all []item
	var cursor *string
	for page := 1; ; page++ {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		if cursor != nil {
			q.Set("cursor", *cursor)
		}
		rows, m := fetch(t, db, itemListing, q)
		meta := m.(*listing.CursorMeta)
		all = append(all, rows...)
		switch {
		case page > total+1:
			t.Fatalf("more than %d pages", total+1)
		case (cursor == nil) != (meta.Cursor == nil) || cursor != nil && *cursor != *meta.Cursor:
			t.Fatalf("page %d: meta.cursor %v, want %v", page, meta.Cursor, cursor)
		case meta.Limit != limit || meta.Total != int64(total):
			t.Fatalf("page %d: meta %+v, want limit %d total %d", page, meta, limit, total)
		case meta.IsLast != (meta.NextCursor == nil):
			t.Fatalf("page %d: is_last %t with next_cursor %v", page, meta.IsLast, meta.NextCursor)
		case !meta.IsLast && len(rows) != limit:
			t.Fatalf("page %d: %d rows before the last page, want %d", page, len(rows), limit)
		case meta.IsLast && len(all) != total:
			t.Fatalf("page %d is the last with %d rows seen, want %d", page, len(all), total)
		}
		if meta.IsLast {
			return all
		}
		cursor = meta.NextCursor
	}
}

func TestFetch_OffsetPaging(t *testing.T) {
	items := sampleItems(120)
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		createItems(t, db, items)
		whole, m := fetch(t, db, itemOffsetListing, url.Values{"sort": {"-rank,name"}})
		meta := m.(*listing.OffsetMeta)
		if len(whole) != 120 || *meta != (listing.OffsetMeta{StartIndex: listing.StartIndex{N: 0, Quoted: true}, Limit: 200, Total: 120}) {
			t.Fatalf("first page: %d rows, meta %+v", len(whole), meta)
		}
		if !slices.IsSortedFunc(whole, orderOf("-rank,name")) {
			t.Errorf("rows out of order: %v", ids(whole))
		}
		var paged []item
		for from := 0; from < 130; from += 50 {
			rows, pageMeta := fetch(t, db, itemOffsetListing, url.Values{"sort": {"-rank,name"}, "limit": {"50"}, "from": {fmt.Sprint(from)}})
			meta := pageMeta.(*listing.OffsetMeta)
			if meta.StartIndex.N != from || meta.Limit != 50 || meta.Total != 120 {
				t.Errorf("from %d: meta %+v", from, meta)
			}
			paged = append(paged, rows...)
		}
		if !slices.Equal(ids(paged), ids(whole)) {
			t.Errorf("offset pages give %v, want %v", ids(paged), ids(whole))
		}
		rows, m := fetch(t, db, itemOffsetListing, url.Values{"from": {"1000"}, "filter": {"rank eq 0"}})
		if len(rows) != 0 || m.(*listing.OffsetMeta).Total != 24 {
			t.Errorf("beyond the end: %d rows, meta %+v", len(rows), m)
		}
	})
}

func TestFetch_Errors(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		createItems(t, db, sampleItems(10))
		first, err := listing.Parse(url.Values{"sort": {"name"}, "limit": {"2"}}, itemListing)
		if err != nil {
			t.Fatal(err)
		}
		var rows []item
		m, err := listing.Fetch(ctx, db.NewSelect().Model(&rows), &rows, itemListing, first)
		if err != nil {
			t.Fatal(err)
		}
		next := *m.(*listing.CursorMeta).NextCursor

		// The cursor with another sort, through Parse and through Fetch.
		if _, err = listing.Parse(url.Values{"sort": {"-name"}, "cursor": {next}}, itemListing); err == nil {
			t.Error("Parse accepted a cursor of another sort")
		}
		var pe *listing.ParamError
		_, err = listing.Fetch(ctx, db.NewSelect().Model(&rows), &rows, itemListing, listing.Params{Sort: []listing.SortKey{{Attr: "name", Desc: true}}, Cursor: next})
		if !errors.As(err, &pe) || pe.Param != "cursor" {
			t.Errorf("Fetch with a cursor of another sort: %v", err)
		}
		_, err = listing.Fetch(ctx, db.NewSelect().Model(&rows), &rows, itemListing, listing.Params{Sort: []listing.SortKey{{Attr: "note"}}})
		if !errors.As(err, &pe) || pe.Param != "sort" {
			t.Errorf("Fetch sorted by a non-sortable attribute: %v", err)
		}
		_, err = listing.Fetch(ctx, db.NewSelect().Model(&rows), &rows, itemListing, listing.Params{Filter: &listing.Present{Attr: listing.AttrPath{Name: "nope"}}})
		if !errors.As(err, &pe) || pe.Param != "filter" {
			t.Errorf("Fetch with a filter outside the allow-list: %v", err)
		}
		_, err = listing.Fetch(ctx, db.NewSelect().Model(&rows), &rows, itemOffsetListing, listing.Params{From: -1})
		if !errors.As(err, &pe) || pe.Param != "from" {
			t.Errorf("Fetch from -1: %v", err)
		}
		if _, err = listing.Fetch(ctx, db.NewSelect().Model(&rows), &rows, &listing.Schema{}, listing.Params{}); err == nil {
			t.Error("Fetch accepted a schema not made by NewSchema")
		}

		// A model without the sort column's field cannot make a cursor.
		type narrow struct {
			bun.BaseModel `bun:"table:listing_items"`
			ID            int64  `bun:"id,pk"`
			Name          string `bun:"name"`
		}
		var narrowRows []narrow
		_, err = listing.Fetch(ctx, db.NewSelect().Model(&narrowRows), &narrowRows, itemListing, listing.Params{Sort: []listing.SortKey{{Attr: "rank"}}, Limit: 2})
		if err == nil || !strings.Contains(err.Error(), `no field for the sort column "rank"`) {
			t.Errorf("Fetch into a model without the sort field: %v", err)
		}
		// A database failure is returned as it is.
		_, err = listing.Fetch(ctx, db.NewSelect().Table("no_such_table"), &rows, itemListing, listing.Params{})
		if err == nil || errors.As(err, &pe) {
			t.Errorf("Fetch from a missing table: %v", err)
		}
	})
}

func TestFetch_PointerRowsAndJoinedColumns(t *testing.T) {
	joined := listing.MustSchema(listing.Schema{
		Name:   "joined",
		Paging: listing.CursorPaging,
		Key:    "i.id",
		Attributes: []listing.Attribute{
			{Name: "id", Column: "i.id", Type: listing.TypeID, Sort: true},
			{Name: "name", Column: "i.name", Type: listing.TypeString, Filter: true, Sort: true},
		},
		DefaultSort: "-name",
	})
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		createItems(t, db, sampleItems(30))
		var seen []int64
		p := listing.Params{Limit: 4}
		p.Filter, _ = listing.ParseFilter(`name co "a"`)
		for {
			var rows []*item
			q := db.NewSelect().Model(&rows).ModelTableExpr("listing_items AS i").ColumnExpr("i.*").Join("JOIN listing_items AS j ON j.id = i.id")
			m, err := listing.Fetch(ctx, q, &rows, joined, p)
			if err != nil {
				t.Fatal(err)
			}
			seen = append(seen, ids(derefItems(rows))...)
			meta := m.(*listing.CursorMeta)
			if meta.IsLast {
				break
			}
			p.Cursor = *meta.NextCursor
		}
		want, _ := fetch(t, db, itemListing, url.Values{"filter": {`name co "a"`}, "sort": {"-name"}, "limit": {"500"}})
		if !slices.Equal(seen, ids(want)) {
			t.Errorf("joined paging gives %v, want %v", seen, ids(want))
		}
	})
}

func derefItems(rows []*item) []item {
	out := make([]item, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	return out
}

// TestSchema_Where_InStatement uses a filter outside Fetch, as dynamic
// groups do with their membership rule: INSERT ... SELECT ... WHERE <rule>.
func TestSchema_Where_InStatement(t *testing.T) {
	items := sampleItems(60)
	rule := `name co "ali" and not (score eq null) or rank eq 2`
	e, err := listing.ParseFilter(rule)
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		createItems(t, db, items)
		if _, err := db.ExecContext(ctx, "CREATE TABLE listing_members (item_id BIGINT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		where, args, err := itemListing.Where(db.Dialect().Name(), e)
		if err != nil {
			t.Fatal(err)
		}
		res, err := db.ExecContext(ctx, "INSERT INTO listing_members (item_id) SELECT id FROM listing_items WHERE "+where, args...)
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for _, it := range items {
			if matches(t, e, it) {
				want = append(want, it.ID)
			}
		}
		var got []int64
		if err := db.NewRaw("SELECT item_id FROM listing_members ORDER BY item_id").Scan(ctx, &got); err != nil {
			t.Fatal(err)
		}
		slices.Sort(want)
		if n, _ := res.RowsAffected(); n != int64(len(want)) || !slices.Equal(got, want) {
			t.Errorf("members %v (%d inserted), want %v", got, n, want)
		}
	})
}
