package sqldb

import (
	"context"
	"fmt"
	"sync"

	"github.com/uptrace/bun"
)

// SQLiteDialect is SQLite's SQL. Its bulk writes run one prepared statement
// execution per row: in process, that is cheaper than building and parsing
// one statement naming every value.
type SQLiteDialect struct{}

// LockRows leaves q as it is: the store's write transactions are
// immediate (see sqliteDSN) and hold the whole database.
func (SQLiteDialect) LockRows(q *bun.SelectQuery, _ string) *bun.SelectQuery { return q }

func (SQLiteDialect) clockMillis() string {
	return "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
}

func (SQLiteDialect) InsertBlobChunk() string {
	return "INSERT INTO blob_chunks (blob_id, seq, data) VALUES (?, ?, ?)"
}

func (SQLiteDialect) migrationTypes() sqlTypes {
	return sqlTypes{Time: "TIMESTAMP", Blob: "BLOB", JSON: "TEXT"}
}

func (SQLiteDialect) QueueWrites(mu *sync.Mutex) func() {
	mu.Lock()
	return mu.Unlock
}

func (SQLiteDialect) EmailLocalPart(col string) string {
	return "CASE WHEN instr(" + col + ", '@') > 0 THEN substr(" + col + ", 1, instr(" + col + ", '@') - 1) ELSE " + col + " END"
}

// insertAuditEvents takes the numbers of org's events and inserts them:
// two statements.
func (SQLiteDialect) insertAuditEvents(ctx context.Context, tx bun.Tx, org int64, evs []unnumbered) error {
	last, err := takeSequences(ctx, tx, org, len(evs))
	if err != nil {
		return err
	}
	rows := make([]AuditEventRow, len(evs))
	for i := range evs {
		rows[i] = evs[i].numbered(last - int64(len(evs)) + 1 + int64(i))
	}
	if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
		return fmt.Errorf("insert audit events: %w", err)
	}
	return nil
}

// pendingAuditOrgs returns none: SQLite's events are numbered as they are
// written.
func (SQLiteDialect) pendingAuditOrgs(context.Context, bun.IDB) ([]int64, error) { return nil, nil }

// numberAuditEvents returns the organization's last number: SQLite's
// events are numbered as they are written.
func (SQLiteDialect) numberAuditEvents(ctx context.Context, db bun.IDB, org int64) (int64, error) {
	return auditHead(ctx, db, org)
}
