// Package listing holds the conventions every list endpoint shares (spec
// 4.0): the SCIM filter language, sort, fields, limit, cursor and offset
// paging, and the meta object of list responses.
//
// # Use
//
// A resource declares its allow-list once, in package models:
//
//	var UserListing = listing.MustSchema(listing.Schema{
//		Name:   "users",
//		Paging: listing.CursorPaging,
//		Attributes: []listing.Attribute{
//			{Name: "id", Column: "id", Type: listing.TypeID, Filter: true, Sort: true},
//			{Name: "firstName", Column: "first_name", Type: listing.TypeString, Filter: true, Sort: true},
//			{Name: "status", Column: "status", Type: listing.TypeInteger, Filter: true, Sort: true},
//			{Name: "primarySource.applicationName", Column: "source_app_name", Type: listing.TypeString, Filter: true},
//			{Name: "primarySource"}, // may be picked by fields only
//		},
//	})
//
// The handler reads the parameters; a *ParamError becomes HTTP 400, code
// 00000107 "Invalid Parameter":
//
//	params, err := listing.Parse(c.Request.URL.Query(), models.UserListing)
//	users, meta, err := store.Users.List(ctx, orgID, params)
//	c.JSON(200, gin.H{"data": listing.Project(users, params.Fields), "meta": meta})
//
// and the store runs the page:
//
//	q := db.NewSelect().Model(&users).Where("org_id = ?", orgID)
//	meta, err := listing.Fetch(ctx, q, &users, UserListing, params)
//
// # Parameters
//
//   - filter: a SCIM filter (below) over the filterable attributes.
//   - sort: comma-separated sortable attributes, ascending, or descending
//     with a leading "-" (sort=-when_created,name). The schema's
//     DefaultSort applies when absent. The schema's Key (id) always breaks
//     ties, ascending, so the order is total.
//   - fields: comma-separated attribute names to return; id is always
//     returned. Sub-attributes cannot be picked; the whole parent can.
//   - limit: a positive page size. Absent, it is the schema's DefaultLimit
//     (DefaultLimit, 100, unless the schema says otherwise; management and
//     job lists use 200); above the schema's MaxLimit (DefaultMaxLimit,
//     1000, unless the schema says otherwise) it is lowered to it.
//   - cursor (cursor paging): the next_cursor of the previous page.
//   - from (offset paging): the index of the first row, from 0.
//
// Attribute names are matched case-insensitively. An empty parameter counts
// as absent; one given twice, a cursor on an offset list or from on a
// cursor list is an error.
//
// # Filter grammar
//
// RFC 7644 §3.4.2.2 without value paths:
//
//	filter  = or
//	or      = and *("or" and)
//	and     = unary *("and" unary)
//	unary   = "not" "(" filter ")" / "(" filter ")" / attrExp
//	attrExp = path "pr" / path op value
//	path    = name ["." name]        ; name: letter, "$" or "_", then letters, digits, "_", "-", "$"
//	op      = "eq" / "ne" / "co" / "sw" / "ew" / "gt" / "ge" / "lt" / "le"
//	value   = JSON string / JSON number / "true" / "false" / "null"
//
// not binds tightest, then and, then or. Keywords and operators
// are case-insensitive. Strings take JSON escapes (\" \\ \/ \b \f \n \r \t
// \uXXXX with surrogate pairs); \u0000 is refused. Not supported, each with
// a clear error: value paths (emails[type eq "work"]), schema URI prefixes
// (urn:...:userName), and not without parentheses. A filter is at most
// MaxFilterLength (4 KiB) bytes with parentheses nested at most
// MaxFilterDepth (32) deep. Errors (*FilterError) give the 1-based
// character position of the problem.
//
// # Filter semantics
//
// Literals must fit the attribute's type: strings for TypeString, integer
// numbers for TypeInteger, true/false for TypeBoolean, RFC 3339 strings for
// TypeTime (compared as instants), digit strings or integer numbers for
// TypeID. A filter on an attribute outside the allow-list, or not
// filterable, is an error naming it.
//
//   - eq, ne, gt, ge, lt, le compare exactly (case-sensitive), so a btree
//     index on the column serves them. gt/ge/lt/le do not apply to booleans.
//     Strings order by the column's collation: bytewise on SQLite; on
//     PostgreSQL use a C collation (database or column) for the same order.
//   - co, sw, ew apply to strings only and ignore the case of ASCII letters
//     (only those, so that both databases agree); %, _ and \ in the value
//     match themselves.
//   - pr: the attribute is not NULL and, for strings, not empty.
//     attr eq null is not (attr pr); attr ne null is attr pr; other operators
//     refuse null.
//   - A comparison never matches a NULL column; not (...) is the exact
//     complement of what it negates, NULLs included.
//
// The SQL uses bun's ? placeholders with arguments for every literal and
// only schema columns as identifiers, and works alike on PostgreSQL and
// SQLite. Schema.Where exposes it for other uses of the filter language,
// such as the membership rules of dynamic groups.
//
// # Paging
//
// Cursor paging (users, groups, devices) is keyset paging: a page holds the
// rows after the previous page's last row in the sort order, found by a
// condition on the sort columns and the id, never by an offset. Every row
// that existed before the first page and still exists after the last is
// returned exactly once however rows are inserted and deleted meanwhile; a
// row inserted or deleted meanwhile is returned at most once. Rows whose
// sort values change meanwhile may be missed or repeated. Rules for the
// schema: sortable columns are NOT NULL, sortable columns and Key are fields
// of the model Fetch scans into, and time columns are written through bun
// (UTC, microseconds) so that a value read back compares equal to itself.
//
// The cursor is opaque: base64url of a small JSON document holding the last
// row's sort key values and id, and a hash of the list, the sort and the
// filter. A cursor used with another sort or filter, or on another list, is
// refused as a bad cursor. It is not a secret: editing one only moves where
// the next page starts within what the caller may see anyway.
//
// Offset paging (every other list) skips from rows of the same total order.
//
// # Meta
//
// Cursor meta: {"cursor": string|null (the cursor this page was asked
// with), "next_cursor": string|null, "is_last": bool, "limit": int,
// "total_no_of_objects": int}. Offset meta: {"start_index": int, or a
// string with Schema.StartIndexString (management and job lists), "limit":
// int, "total_no_of_objects": int}. total_no_of_objects counts the rows
// matching the filter. meta.limit is the page size used, or the schema's
// DefaultLimit under MetaLimitDefault.
package listing
