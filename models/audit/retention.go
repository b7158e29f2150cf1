package audit

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/sqldb"
)

// pruneBatch is how many events one retention transaction deletes: short
// transactions, no long locks.
const pruneBatch = 5000

// Prune deletes the organization's events sealed by digests that ended
// before cutoff, pruneBatch at a time, and records the last sequence it
// deleted, so that verification reports the range as pruned rather than
// removed. Digests are kept. It returns how many events it deleted. Events
// not sealed yet are never pruned.
func (s *DigestStore) Prune(ctx context.Context, orgID int64, cutoff time.Time) (int64, error) {
	var upTo int64
	err := s.db.NewSelect().Model((*Digest)(nil)).ColumnExpr("COALESCE(MAX(to_seq), 0)").
		Where("org_id = ? AND period_end < ?", orgID, cutoff.UTC()).Scan(ctx, &upTo)
	if err != nil {
		return 0, models.Unavailable(fmt.Errorf("find the events to prune: %w", err))
	}
	var deleted int64
	for {
		var done bool
		err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
			var pruned int64
			if err := tx.NewSelect().Table("audit_heads").Column("pruned_seq").Where("org_id = ?", orgID).Scan(ctx, &pruned); err != nil {
				return fmt.Errorf("read the pruned sequence: %w", err)
			}
			to := min(pruned+pruneBatch, upTo)
			if to <= pruned {
				done = true
				return nil
			}
			res, err := tx.NewDelete().Model((*sqldb.AuditEventRow)(nil)).Where("org_id = ? AND seq > ? AND seq <= ?", orgID, pruned, to).Exec(ctx)
			if err != nil {
				return fmt.Errorf("prune audit events: %w", err)
			}
			n, _ := res.RowsAffected()
			deleted += n
			_, err = tx.NewUpdate().Table("audit_heads").Set("pruned_seq = ?", to).Where("org_id = ?", orgID).Exec(ctx)
			return err
		})
		if err != nil || done {
			return deleted, err
		}
	}
}

// Verify checks the organization's events and digests in the database
// against keys (docs/audit.md), reading the events a batch at a time (the
// next batch read while one is checked); with since not zero, only the
// digests that end at or after it and their events. It reads one snapshot
// of the log, after numbering the events committed before it: events
// committed while it runs are not in it (and not taken for events inserted
// past the last number it read).
func (s *DigestStore) Verify(ctx context.Context, orgID int64, keys []ed25519.PublicKey, since time.Time) (Result, error) {
	if _, err := sqldb.NumberAuditEvents(ctx, s.db, orgID); err != nil {
		return Result{}, err
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return Result{}, models.Unavailable(fmt.Errorf("begin reading the audit log: %w", err))
	}
	defer func() { _ = tx.Rollback() }() // it only read
	var digests []Digest
	if err = tx.NewSelect().Model(&digests).Where("org_id = ?", orgID).OrderExpr("number").Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Result{}, models.Unavailable(fmt.Errorf("read audit digests: %w", err))
	}
	var head struct {
		LastSeq   int64 `bun:"last_seq"`
		PrunedSeq int64 `bun:"pruned_seq"`
	}
	err = tx.NewSelect().Table("audit_heads").Column("last_seq", "pruned_seq").Where("org_id = ?", orgID).Scan(ctx, &head)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Result{}, models.Unavailable(fmt.Errorf("read the audit head: %w", err))
	}
	v := NewVerificationSince(keys, digests, head.LastSeq, head.PrunedSeq, since)
	// One batch is read while the one before is checked, its bodies on
	// every core.
	ctx, cancel := context.WithCancel(ctx)
	batches := make(chan verifyBatch, 1)
	var reader sync.WaitGroup
	reader.Go(func() { readForVerify(ctx, tx, orgID, max(v.start-1, 0), batches) })
	defer func() { cancel(); reader.Wait() }() // the reader ends on the cancel

	var (
		evs    []VerifyEvent
		checks bodyChecks
	)
	for b := range batches {
		if b.err != nil {
			return Result{}, b.err
		}
		evs = evs[:0]
		for _, r := range b.rows {
			evs = append(evs, VerifyEvent{Sequence: r.Sequence, Body: r.Body, StoredHash: r.Hash})
		}
		checks.check(evs)
		for i := range evs {
			v.eventChecked(evs, &checks, i)
		}
	}
	return v.Finish(), nil
}

// verifyBatch is a batch of events Verify reads, or the error that ended
// the reading.
type verifyBatch struct {
	rows []verifyRow
	err  error
}

// verifyRow is what a verification reads of an event.
type verifyRow struct {
	bun.BaseModel `bun:"table:audit_events"`

	Sequence int64  `bun:"seq"`
	Body     string `bun:"body"`
	Hash     string `bun:"hash"`
}

// readForVerify sends the organization's events after sequence after, in
// order, sealBatch at a time (the columns a verification needs), to out,
// which it closes at the end.
func readForVerify(ctx context.Context, tx bun.Tx, orgID, after int64, out chan<- verifyBatch) {
	defer close(out)
	for {
		rows := make([]verifyRow, 0, sealBatch)
		err := tx.NewSelect().Model(&rows).Column("seq", "body", "hash").
			Where("org_id = ? AND seq > ?", orgID, after).OrderExpr("seq").Limit(sealBatch).Scan(ctx)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			err = models.Unavailable(fmt.Errorf("read audit events: %w", err))
		} else {
			err = nil
		}
		select {
		case out <- verifyBatch{rows: rows, err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil || len(rows) < sealBatch {
			return
		}
		after = rows[len(rows)-1].Sequence
	}
}
