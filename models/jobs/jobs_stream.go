package jobs

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// States returns the jobs among ids as stored, without their input (which
// may be large): what the progress streams of GET /jobs/{id}/events follow,
// one query for every job a process watches. A deleted job is missing from
// the answer. The caller has checked each job's organization.
func (s *JobStore) States(ctx context.Context, ids []int64) ([]Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []Job
	err := s.db.NewSelect().Model(&out).ExcludeColumn("input").
		Where("id IN (?)", bun.List(ids)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select job states: %w", err)
	}
	return out, nil
}

// ResultsAfter returns up to limit results of job jobID whose row (seq) is
// above afterSeq, in row order: one keyset page of an export that walks
// every result without holding a transaction between pages, in constant
// memory whatever the job's size. The caller has checked the job's
// organization.
func (s *JobStore) ResultsAfter(ctx context.Context, jobID, afterSeq int64, limit int) ([]JobResult, error) {
	var out []JobResult
	err := s.db.NewSelect().Model(&out).Where("job_id = ? AND seq > ?", jobID, afterSeq).
		Order("seq").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select job results: %w", err)
	}
	return out, nil
}
