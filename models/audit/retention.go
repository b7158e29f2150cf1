package audit

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
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
// against keys (docs/audit.md), reading the events a batch at a time; with
// since not zero, only the digests that end at or after it and their
// events.
func (s *DigestStore) Verify(ctx context.Context, orgID int64, keys []ed25519.PublicKey, since time.Time) (Result, error) {
	var digests []Digest
	if err := s.db.NewSelect().Model(&digests).Where("org_id = ?", orgID).OrderExpr("number").Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Result{}, models.Unavailable(fmt.Errorf("read audit digests: %w", err))
	}
	var head struct {
		LastSeq   int64 `bun:"last_seq"`
		PrunedSeq int64 `bun:"pruned_seq"`
	}
	err := s.db.NewSelect().Table("audit_heads").Column("last_seq", "pruned_seq").Where("org_id = ?", orgID).Scan(ctx, &head)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Result{}, models.Unavailable(fmt.Errorf("read the audit head: %w", err))
	}
	v := NewVerificationSince(keys, digests, head.LastSeq, head.PrunedSeq, since)
	after := max(v.start-1, 0)
	for {
		var rows []sqldb.AuditEventRow
		err := s.db.NewSelect().Model(&rows).Column("seq", "body", "hash").
			Where("org_id = ? AND seq > ?", orgID, after).OrderExpr("seq").Limit(sealBatch).Scan(ctx)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return Result{}, models.Unavailable(fmt.Errorf("read audit events: %w", err))
		}
		for _, r := range rows {
			v.Event(VerifyEvent{Sequence: r.Sequence, Body: r.Body, StoredHash: r.Hash})
		}
		if len(rows) < sealBatch {
			return v.Finish(), nil
		}
		after = rows[len(rows)-1].Sequence
	}
}
