package listing

import (
	"context"
	"fmt"
	"reflect"

	"github.com/uptrace/bun"
)

// Fetch runs one page of a list. q selects the rows the caller may see
// (its model, joins and tenancy conditions) and has no ORDER BY, LIMIT or
// OFFSET of its own; Fetch adds p's filter, counts the matching rows, orders
// by p's sort (then Key), pages by cursor or offset as s says, and scans the
// page into dest, normally the slice q's model points to. It returns the
// page's meta, a *CursorMeta or an *OffsetMeta.
//
// Cursor paging reads limit+1 rows to know whether the page is the last.
// The count is a statement of its own: under concurrent writes it may differ
// from what the page saw.
//
// Bad parameters (a stale cursor, an unknown sort attribute in hand-built
// Params) give a *ParamError before any query runs; database failures are
// returned wrapped.
func Fetch[T any](ctx context.Context, q *bun.SelectQuery, dest *[]T, s *Schema, p Params) (Meta, error) {
	return FetchCounted(ctx, q, dest, s, p, nil)
}

// FetchCounted is Fetch for a list that keeps its total elsewhere: when
// count is not nil, it gives total_no_of_objects instead of a COUNT of the
// matching rows (a counter kept with the rows, say, for a page without a
// filter). The caller makes sure count counts what the page selects.
func FetchCounted[T any](ctx context.Context, q *bun.SelectQuery, dest *[]T, s *Schema, p Params, count func(context.Context) (int64, error)) (Meta, error) {
	return FetchScanned(ctx, q, dest, s, p, count, scanPage[T])
}

// ScanFunc runs the page query q that FetchScanned built and appends the
// rows it reads to dest, in the order they come. q selects the columns the
// caller's query chose, in that order, so the caller can scan them without
// bun's mapping of columns to fields (SelectQuery.Rows runs q with the
// query hooks).
type ScanFunc[T any] func(ctx context.Context, q *bun.SelectQuery, dest *[]T) error

// scanPage is the ScanFunc of Fetch: bun scans the rows into dest.
func scanPage[T any](ctx context.Context, q *bun.SelectQuery, dest *[]T) error {
	return q.Scan(ctx, dest)
}

// FetchScanned is FetchCounted with the caller reading the rows: it builds
// and counts the page as FetchCounted does, then lets scan run the page
// query and append its rows to dest (empty or nil when called), and makes
// the meta from what scan appended. Everything else is FetchCounted's: the
// parameters are checked before any query runs, the query reads limit+1
// rows and dest keeps limit of them, and the next cursor comes from the
// sort keys of the page's last row, read through bun's mapping of columns to
// fields of T (which scan must fill).
func FetchScanned[T any](ctx context.Context, q *bun.SelectQuery, dest *[]T, s *Schema, p Params, count func(context.Context) (int64, error), scan ScanFunc[T]) (Meta, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	cols, err := s.keyColumns(p.Sort)
	if err != nil {
		return nil, err
	}
	hash, err := s.pageHash(cols, p.Filter)
	if err != nil {
		return nil, err
	}
	var after []any // key values of the row the page starts after
	switch {
	case s.Paging == CursorPaging && p.Cursor != "":
		if after, err = readCursor(p.Cursor, cols, hash); err != nil {
			return nil, err
		}
	case s.Paging == OffsetPaging && p.From < 0:
		return nil, &ParamError{Param: "from", Detail: "must not be negative"}
	}
	if p.Filter != nil {
		var where string
		var args []any
		if where, args, err = s.Where(q.Dialect().Name(), p.Filter); err != nil {
			return nil, &ParamError{Param: "filter", Detail: err.Error()}
		}
		q = q.Where(where, args...)
	}
	if count == nil {
		count = q.Count
	}
	total, err := count(ctx)
	if err != nil {
		return nil, fmt.Errorf("count %s: %w", s.Name, err)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = s.DefaultLimit
	}
	limit = min(limit, s.MaxLimit)
	q = q.OrderExpr(orderBy(cols))

	if s.Paging == OffsetPaging {
		if err := scan(ctx, q.Offset(int64(p.From)).Limit(int64(limit)), dest); err != nil {
			return nil, fmt.Errorf("list %s: %w", s.Name, err)
		}
		return &OffsetMeta{
			StartIndex: StartIndex{N: p.From, Quoted: s.StartIndexString},
			Limit:      s.metaLimit(limit),
			Total:      total,
		}, nil
	}

	meta := &CursorMeta{Limit: s.metaLimit(limit), Total: total, IsLast: true}
	if after != nil {
		where, args := keysetWhere(cols, after)
		q = q.Where(where, args...)
		meta.Cursor = &p.Cursor
	}
	if err := scan(ctx, q.Limit(int64(limit+1)), dest); err != nil {
		return nil, fmt.Errorf("list %s: %w", s.Name, err)
	}
	if len(*dest) > limit {
		*dest = (*dest)[:limit]
		vals, err := rowKey(q.DB(), reflect.ValueOf(dest).Elem().Index(limit-1), cols)
		if err != nil {
			return nil, err
		}
		next, err := encodeCursor(hash, vals)
		if err != nil {
			return nil, err
		}
		meta.NextCursor, meta.IsLast = &next, false
	}
	return meta, nil
}
