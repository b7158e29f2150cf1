package jobs

import (
	"context"

	"iam/models/listing"
)

// JobListing is the allow-list of GET /jobs: offset paging, newest first,
// 200 a page by default (spec 4.0: 200 in job lists), start_index a string.
var JobListing = listing.MustSchema(listing.Schema{
	Name: "jobs",
	Attributes: []listing.Attribute{
		{Name: "id", Column: "id", Type: listing.TypeID, Filter: true},
		{Name: "module", Column: "module", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "status", Column: "status", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "action_name", Column: "action_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "start_time", Column: "start_time", Type: listing.TypeTime, Filter: true, Sort: true},
		{Name: "end_time", Column: "end_time", Type: listing.TypeTime, Filter: true},
		{Name: "message"},
		{Name: "progress"},
	},
	DefaultSort:      "-start_time",
	DefaultLimit:     200,
	MaxLimit:         1000,
	Paging:           listing.OffsetPaging,
	StartIndexString: true,
})

// JobResultListing is the allow-list of GET /jobs/{id}/results: row order,
// offset paging.
var JobResultListing = listing.MustSchema(listing.Schema{
	Name: "job_results",
	Key:  "seq",
	Attributes: []listing.Attribute{
		{Name: "row", Column: "seq", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "id", Column: "entity_id", Type: listing.TypeString, Filter: true},
		{Name: "status", Column: "status", Type: listing.TypeString, Filter: true},
		{Name: "message", Column: "message", Type: listing.TypeString, Filter: true},
	},
	DefaultLimit:     200,
	MaxLimit:         1000,
	Paging:           listing.OffsetPaging,
	StartIndexString: true,
})

// List returns a page of the organization's jobs.
func (s *JobStore) List(ctx context.Context, orgID int64, p listing.Params) ([]Job, listing.Meta, error) {
	var jobs []Job
	q := s.db.NewSelect().Model(&jobs).Where("org_id = ?", orgID)
	meta, err := listing.Fetch(ctx, q, &jobs, JobListing, p)
	return jobs, meta, err
}

// ListResults returns a page of a job's results. ENOTFOUND when the job is
// not the organization's.
func (s *JobStore) ListResults(ctx context.Context, orgID, jobID int64, p listing.Params) ([]JobResult, listing.Meta, error) {
	if _, err := s.Get(ctx, orgID, jobID); err != nil {
		return nil, nil, err
	}
	var results []JobResult
	q := s.db.NewSelect().Model(&results).Where("job_id = ?", jobID)
	meta, err := listing.Fetch(ctx, q, &results, JobResultListing, p)
	return results, meta, err
}
