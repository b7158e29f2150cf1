package listing_test

// The database tests live in package listing_test: the shared database
// helper iam/models/dbtest imports iam/models, which imports listing.

import (
	"cmp"
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/listing"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var attributes = []listing.Attribute{
	{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
	{Name: "name", Column: "name", Type: listing.TypeString, Filter: true, Sort: true},
	{Name: "rank", Column: "rank", Type: listing.TypeInteger, Filter: true, Sort: true},
	{Name: "active", Column: "active", Type: listing.TypeBoolean, Filter: true, Sort: true},
	{Name: "createdAt", Column: "created_at", Type: listing.TypeTime, Filter: true, Sort: true},
	{Name: "note", Column: "note", Type: listing.TypeString, Filter: true},
	{Name: "score", Column: "score", Type: listing.TypeInteger, Filter: true},
	{Name: "owner.name", Column: "owner_name", Type: listing.TypeString, Filter: true},
}

// items pages by cursor, items-offset by offset.
var (
	itemListing = listing.MustSchema(listing.Schema{
		Name: "items", Paging: listing.CursorPaging, Attributes: attributes, DefaultSort: "name", MaxLimit: 500,
	})
	itemOffsetListing = listing.MustSchema(listing.Schema{
		Name: "items-offset", Paging: listing.OffsetPaging, Attributes: attributes, DefaultLimit: 200, StartIndexString: true,
	})
)

// item is a row of the test table.
type item struct {
	bun.BaseModel `bun:"table:listing_items"`

	ID        int64     `bun:"id,pk" json:"id,string"`
	Name      string    `bun:"name,notnull" json:"name"`
	Rank      int       `bun:"rank,notnull" json:"rank"`
	Active    bool      `bun:"active,notnull" json:"active"`
	CreatedAt time.Time `bun:"created_at,notnull" json:"createdAt"`
	Note      *string   `bun:"note" json:"note,omitempty"`
	Score     *int64    `bun:"score" json:"score"`
	OwnerName string    `bun:"owner_name,notnull" json:"-"`
}

var (
	sampleNames = []string{"alice", "Alice", "ALICE", "bob", "Bob", "émile", "Émile", "100%", "a_b", `back\slash`,
		"", "zed", "Zoë", "o'hara", "x?y", "ali"}
	sampleBase = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
)

// sampleItems makes n items with ties on every sortable attribute, NULLs,
// empty strings, LIKE metacharacters and non-ASCII letters, with ids in no
// particular order.
func sampleItems(n int) []item {
	items := make([]item, n)
	for i := range items {
		it := item{
			ID:        int64(i*7919%10007 + 1),
			Name:      sampleNames[i%len(sampleNames)],
			Rank:      i%5 - 2,
			Active:    i%3 == 0,
			CreatedAt: sampleBase.Add(time.Duration(i%11) * 1234567 * time.Microsecond),
			OwnerName: sampleNames[i*3%len(sampleNames)],
		}
		if i%4 != 0 {
			it.Note = &sampleNames[i*5%len(sampleNames)]
		}
		if i%3 != 1 {
			score := int64(i % 7)
			it.Score = &score
		}
		items[i] = it
	}
	return items
}

// createItems creates the test table and inserts items.
func createItems(t testing.TB, db bun.IDB, items []item) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.NewCreateTable().Model((*item)(nil)).Exec(ctx); err != nil {
		t.Fatalf("create table: %v", err)
	}
	if len(items) > 0 {
		if _, err := db.NewInsert().Model(&items).Exec(ctx); err != nil {
			t.Fatalf("insert items: %v", err)
		}
	}
}

// fetch runs Parse and Fetch for one request's query.
func fetch(t testing.TB, db bun.IDB, s *listing.Schema, query url.Values) ([]item, listing.Meta) {
	t.Helper()
	p, err := listing.Parse(query, s)
	if err != nil {
		t.Fatalf("Parse(%v): %v", query, err)
	}
	var rows []item
	meta, err := listing.Fetch(context.Background(), db.NewSelect().Model(&rows), &rows, s, p)
	if err != nil {
		t.Fatalf("Fetch(%v): %v", query, err)
	}
	return rows, meta
}

func ids(items []item) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// quote writes a filter string literal.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// value returns an attribute of it and whether it is NULL.
func (it item) value(attr string) (any, bool) {
	switch strings.ToLower(attr) {
	case "id":
		return it.ID, false
	case "name":
		return it.Name, false
	case "rank":
		return int64(it.Rank), false
	case "active":
		return it.Active, false
	case "createdat":
		return it.CreatedAt, false
	case "note":
		if it.Note == nil {
			return nil, true
		}
		return *it.Note, false
	case "score":
		if it.Score == nil {
			return nil, true
		}
		return *it.Score, false
	case "owner.name":
		return it.OwnerName, false
	}
	panic("no attribute " + attr)
}

// matches is the oracle: the filter semantics of the package documentation
// evaluated in Go, independently of the package's SQL.
func matches(t testing.TB, e listing.Expr, it item) bool {
	switch e := e.(type) {
	case *listing.And:
		for _, term := range e.Terms {
			if !matches(t, term, it) {
				return false
			}
		}
		return true
	case *listing.Or:
		for _, term := range e.Terms {
			if matches(t, term, it) {
				return true
			}
		}
		return false
	case *listing.Not:
		return !matches(t, e.Expr, it)
	case *listing.Present:
		return present(it, e.Attr.String())
	case *listing.Compare:
		return compare(t, e, it)
	}
	t.Fatalf("unknown node %T", e)
	return false
}

func present(it item, attr string) bool {
	v, null := it.value(attr)
	return !null && v != ""
}

func compare(t testing.TB, e *listing.Compare, it item) bool {
	attr := e.Attr.String()
	if e.Value.Kind == listing.NullValue {
		return present(it, attr) == (e.Op == listing.Ne)
	}
	v, null := it.value(attr)
	if null {
		return false
	}
	lit := literalOf(t, v, e.Value)
	switch e.Op {
	case listing.Co:
		return strings.Contains(asciiLower(v.(string)), asciiLower(lit.(string)))
	case listing.Sw:
		return strings.HasPrefix(asciiLower(v.(string)), asciiLower(lit.(string)))
	case listing.Ew:
		return strings.HasSuffix(asciiLower(v.(string)), asciiLower(lit.(string)))
	}
	c := compareValues(v, lit)
	switch e.Op {
	case listing.Eq:
		return c == 0
	case listing.Ne:
		return c != 0
	case listing.Gt:
		return c > 0
	case listing.Ge:
		return c >= 0
	case listing.Lt:
		return c < 0
	default:
		return c <= 0
	}
}

// literalOf reads a literal as the type of the attribute value v.
func literalOf(t testing.TB, v any, lit listing.Value) any {
	var out any
	var err error
	switch v.(type) {
	case string:
		out = lit.Text
	case int64:
		out, err = strconv.ParseInt(lit.Text, 10, 64)
	case bool:
		out = lit.Bool
	case time.Time:
		out, err = time.Parse(time.RFC3339Nano, lit.Text)
	}
	if err != nil {
		t.Fatalf("oracle: literal %v: %v", lit, err)
	}
	return out
}

func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// compareValues orders two values of one type; strings bytewise, as SQLite
// and a C-collated PostgreSQL do.
func compareValues(a, b any) int {
	switch a := a.(type) {
	case string:
		return strings.Compare(a, b.(string))
	case int64:
		return cmp.Compare(a, b.(int64))
	case bool:
		switch {
		case a == b.(bool):
			return 0
		case a:
			return 1
		}
		return -1
	case time.Time:
		return a.Compare(b.(time.Time))
	}
	panic("incomparable")
}

// orderOf is the documented order of a sort parameter: its keys, or the
// default sort (name), then id ascending.
func orderOf(sort string) func(a, b item) int {
	if sort == "" {
		sort = "name"
	}
	keys := append(strings.Split(sort, ","), "id")
	return func(a, b item) int {
		for _, k := range keys {
			attr, desc := strings.CutPrefix(k, "-")
			va, _ := a.value(attr)
			vb, _ := b.value(attr)
			if c := compareValues(va, vb); c != 0 {
				if desc {
					return -c
				}
				return c
			}
		}
		return 0
	}
}

// bytewiseStrings reports whether the database orders text bytewise, as
// SQLite and a C-collated PostgreSQL do.
func bytewiseStrings(t testing.TB, db *bun.DB) bool {
	if db.Dialect().Name().String() != "pg" {
		return true
	}
	var collate string
	if err := db.NewRaw("SELECT datcollate FROM pg_database WHERE datname = current_database()").Scan(context.Background(), &collate); err != nil {
		t.Fatal(err)
	}
	if collate != "C" && collate != "POSIX" {
		t.Logf("database collation %s: string order not checked against bytewise order", collate)
		return false
	}
	return true
}
