package sqldb

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
)

// PGDialect is PostgreSQL's SQL. The bulk paths of chunked jobs talk to
// pgx directly: array parameters and COPY travel in the binary protocol,
// where bun would format every value of a many-thousand-row statement into
// its SQL text.
type PGDialect struct{}

func (PGDialect) LockRows(q *bun.SelectQuery, strength string) *bun.SelectQuery {
	return q.For(strength)
}

func (PGDialect) clockMillis() string {
	return "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
}

func (PGDialect) InsertBlobChunk() string {
	return "INSERT INTO blob_chunks (blob_id, seq, data) VALUES ($1, $2, $3)"
}

func (PGDialect) migrationTypes() sqlTypes {
	return sqlTypes{Postgres: true, Time: "TIMESTAMPTZ", Blob: "BYTEA", JSON: "JSONB"}
}

func (PGDialect) QueueWrites(*sync.Mutex) func() { return func() {} }

// WithPgxTx runs fn in a transaction on a pgx connection taken from db's
// pool, committing when fn returns nil.
func WithPgxTx(ctx context.Context, db *bun.DB, fn func(tx pgx.Tx) error) error {
	conn, err := db.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("take a connection: %w", err)
	}
	defer func() { _ = conn.Close() }() // returns it to the pool
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the PostgreSQL driver is %T, not pgx", dc)
		}
		return pgx.BeginFunc(ctx, sc.Conn(), fn)
	})
}

func (PGDialect) EmailLocalPart(col string) string {
	return "split_part(" + col + ", '@', 1)"
}
