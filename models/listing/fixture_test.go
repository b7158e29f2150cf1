package listing

import (
	"time"

	"github.com/uptrace/bun"
)

// itemAttributes is the allow-list of the test resource: every type, a
// nullable string and integer, a sub-attribute, an attribute that may only
// be picked by fields and one that is neither filterable nor sortable.
var itemAttributes = []Attribute{
	{Name: "id", Column: "id", Type: TypeID, Filter: true, Sort: true},
	{Name: "name", Column: "name", Type: TypeString, Filter: true, Sort: true},
	{Name: "rank", Column: "rank", Type: TypeInteger, Filter: true, Sort: true},
	{Name: "active", Column: "active", Type: TypeBoolean, Filter: true, Sort: true},
	{Name: "createdAt", Column: "created_at", Type: TypeTime, Filter: true, Sort: true},
	{Name: "note", Column: "note", Type: TypeString, Filter: true},
	{Name: "score", Column: "score", Type: TypeInteger, Filter: true},
	{Name: "owner.name", Column: "owner_name", Type: TypeString, Filter: true},
	{Name: "secret", Column: "secret", Type: TypeString},
	{Name: "owner"},
}

var itemSchema = MustSchema(Schema{
	Name:        "items",
	Paging:      CursorPaging,
	Attributes:  itemAttributes,
	DefaultSort: "name",
	MaxLimit:    500,
})

var itemOffsetSchema = MustSchema(Schema{
	Name:             "item-jobs",
	Paging:           OffsetPaging,
	Attributes:       itemAttributes,
	DefaultLimit:     200,
	StartIndexString: true,
})

// item is a row of the test resource.
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
	Secret    string    `bun:"secret,notnull" json:"secret"`
}
